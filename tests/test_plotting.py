import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from course_pe import sinusoidal_encoding  # noqa: E402
from course_pe.plotting import (  # noqa: E402
    plot_attention,
    plot_dimension_curves,
    plot_encoding_heatmap,
    plot_loss_by_position,
    use_course_style,
)


def test_plots_have_titles_and_labels():
    use_course_style()
    pe = sinusoidal_encoding(20, 8)
    for ax in (
        plot_encoding_heatmap(pe),
        plot_dimension_curves(pe, [0, 1]),
        plot_attention(np.eye(4), tokens=list("abcd")),
        plot_loss_by_position({"rope": np.ones(10)}, train_length=5, floor=0.5),
    ):
        assert ax.get_title() and ax.get_xlabel() and ax.get_ylabel()
    plt.close("all")


def test_attention_plot_rejects_3d():
    with pytest.raises(ValueError, match="q_len"):
        plot_attention(np.ones((2, 3, 3)))
    plt.close("all")
