"""The sweep's Pareto figure: labels stay inside the saved PNG."""

import matplotlib.image as mpimg

from lapis.figures.pareto import pareto_figure


def test_labels_of_points_at_the_right_edge_stay_inside(tmp_path):
    configs = [dict(config=f"block_n={n},consumer_wgs=2,stages=3", smem_bytes=n * 1024, geomean_tflops=600.0 + n,
                    runnable=n == 128) for n in (64, 128, 256)][::-1]
    path = tmp_path / "p.png"
    fig = pareto_figure(configs, configs[::-1], str(path), "t")
    h, w = mpimg.imread(path).shape[:2]
    assert (w, h) == (900, 576)  # 7.5 x 4.8 in at dpi 120
    fig.set_dpi(120)
    fig.canvas.draw()
    labels = [t for t in fig.axes[0].texts if (t.get_gid() or "").startswith("label:")]
    assert len(labels) == 3
    for t in labels:
        box = t.get_window_extent()
        assert 0 <= box.x0 and box.x1 <= w, t.get_text()
    right = next(t for t in labels if t.get_text().startswith("block_n=256"))
    assert right.get_ha() == "right"
