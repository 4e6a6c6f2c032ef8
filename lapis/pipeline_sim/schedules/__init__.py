"""Built-in schedules: Hopper attention (attention_h200, attention_h200_fa2), the B200 write-up's chapters
(attention_b200), Emmy's moves on consumer Blackwell (attention_sm120) and the warp-specialized GEMM (gemm_ws)."""
