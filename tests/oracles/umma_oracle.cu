// CUTLASS's own tcgen05 descriptor code, run on the host, as an oracle for lapis.layouts.descriptors.sm100.
// Prints one line per instruction descriptor (make_instr_desc) and per shared-memory descriptor
// bit-field assignment. Headers: the include/ folder shipped in the nvidia-cutlass wheel.
#include <cstdio>
#include <cute/arch/mma_sm100_desc.hpp>
#include <cute/numeric/numeric_types.hpp>

using namespace cute;
using UMMA::Major;

template <class A, class B, class C, int M, int N, Major MA, Major MB>
void instr(const char* kind, const char* a, const char* b, const char* c) {
  UMMA::InstrDescriptor d = UMMA::make_instr_desc<A, B, C, M, N, MA, MB>();
  uint32_t v = d.desc_;
  std::printf("instr %s %s %s %s %d %d %s %s %u\n", kind, a, b, c, M, N, MA == Major::K ? "K" : "MN",
              MB == Major::K ? "K" : "MN", v);
}

void smem(int start, int lbo, int sbo, int base, int mode, int layout) {
  UMMA::SmemDescriptor d;
  d.desc_ = 0;
  d.start_address_ = start >> 4;
  d.leading_byte_offset_ = lbo >> 4;
  d.stride_byte_offset_ = sbo >> 4;
  d.version_ = 1;
  d.base_offset_ = base;
  d.lbo_mode_ = mode;
  d.layout_type_ = layout;
  std::printf("smem %d %d %d %d %d %d %llu\n", start, lbo, sbo, base, mode, layout,
              (unsigned long long)d.desc_);
}

#define FOR_MAJORS(A, B, C, M, N, kind, a, b, c)            \
  instr<A, B, C, M, N, Major::K, Major::K>(kind, a, b, c);   \
  instr<A, B, C, M, N, Major::K, Major::MN>(kind, a, b, c);  \
  instr<A, B, C, M, N, Major::MN, Major::K>(kind, a, b, c);  \
  instr<A, B, C, M, N, Major::MN, Major::MN>(kind, a, b, c);

int main() {
  FOR_MAJORS(half_t, half_t, float, 128, 256, "f16", "f16", "f16", "f32")
  FOR_MAJORS(bfloat16_t, bfloat16_t, float, 64, 8, "f16", "bf16", "bf16", "f32")
  FOR_MAJORS(bfloat16_t, bfloat16_t, float, 256, 128, "f16", "bf16", "bf16", "f32")
  FOR_MAJORS(half_t, half_t, half_t, 128, 64, "f16", "f16", "f16", "f16")
  FOR_MAJORS(tfloat32_t, tfloat32_t, float, 128, 128, "tf32", "tf32", "tf32", "f32")
  FOR_MAJORS(float_e4m3_t, float_e4m3_t, float, 128, 256, "f8f6f4", "e4m3", "e4m3", "f32")
  FOR_MAJORS(float_e5m2_t, float_e4m3_t, half_t, 64, 16, "f8f6f4", "e5m2", "e4m3", "f16")
  FOR_MAJORS(int8_t, int8_t, int32_t, 128, 64, "i8", "s8", "s8", "s32")
  FOR_MAJORS(uint8_t, int8_t, int32_t, 64, 32, "i8", "u8", "s8", "s32")
  int layouts[] = {0, 1, 2, 4, 6};
  for (int li = 0; li < 5; ++li)
    for (int base = 0; base < 8; base += 3)
      for (int mode = 0; mode < 2; ++mode)
        smem(0x400 + 0x30 * li, 16 << li, 1024 + 512 * base, base, mode, layouts[li]);
  smem(0x3FFF0, 0x3FFF0, 0x3FFF0, 7, 1, 6);
  return 0;
}
