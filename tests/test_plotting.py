import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from course_pe import sinusoidal_encoding  # noqa: E402
from course_pe.plotting import (  # noqa: E402
    COLORS,
    plot_attention,
    plot_dimension_curves,
    plot_encoding_heatmap,
    plot_loss_by_position,
    use_course_style,
)


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def test_style_sets_the_documented_defaults():
    use_course_style()
    assert tuple(matplotlib.rcParams["figure.figsize"]) == (7.0, 3.6)
    assert matplotlib.rcParams["figure.dpi"] == 100 and matplotlib.rcParams["axes.grid"]


def test_heatmap_shows_the_table_with_its_labels_and_colorbar():
    pe = sinusoidal_encoding(20, 8)
    ax = plot_encoding_heatmap(pe, title="table")
    assert (ax.get_title(), ax.get_xlabel(), ax.get_ylabel()) == ("table", "dimension", r"position $p$")
    (image,) = ax.get_images()
    np.testing.assert_array_equal(image.get_array(), pe.double().numpy())  # the data, positions down
    assert image.get_clim() == (-1, 1)
    assert len(ax.figure.axes) == 2 and ax.figure.axes[1].get_ylabel() == "value"  # colorbar with its label
    ax2 = plot_encoding_heatmap(pe, colorbar=False)
    assert len(ax2.figure.axes) == 1


def test_dimension_curves_plot_the_selected_columns():
    pe = sinusoidal_encoding(20, 8)
    ax = plot_dimension_curves(pe, [0, 3], labels=["sin 0", "cos 1"])
    assert (ax.get_xlabel(), ax.get_ylabel()) == (r"position $p$", "value")
    lines = ax.get_lines()
    assert [line.get_label() for line in lines] == ["sin 0", "cos 1"]
    for line, d in zip(lines, [0, 3]):
        np.testing.assert_array_equal(line.get_xdata(), np.arange(20))
        np.testing.assert_array_equal(line.get_ydata(), pe[:, d].double().numpy())
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["sin 0", "cos 1"]
    default = plot_dimension_curves(pe, [5])
    assert default.get_lines()[0].get_label() == "dim 5"


def test_attention_plot_has_queries_down_keys_across_and_token_ticks():
    w = torch.softmax(torch.randn(4, 4), -1)
    ax = plot_attention(w, tokens=list("abcd"))
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("key", "query")
    (image,) = ax.get_images()
    np.testing.assert_allclose(image.get_array(), w.double().numpy())
    assert [t.get_text() for t in ax.get_xticklabels()] == list("abcd")
    assert [t.get_text() for t in ax.get_yticklabels()] == list("abcd")
    assert image.get_clim()[1] == pytest.approx(float(w.max()))


def test_loss_plot_has_curves_colours_training_line_and_floor():
    curves = {"rope": np.linspace(2, 1, 10), "ALiBi slopes": np.array([3.0, np.nan, 1.0])}
    ax = plot_loss_by_position(curves, train_length=5, floor=0.5)
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("position", "cross-entropy (nats)")
    lines = {line.get_label(): line for line in ax.get_lines()}
    np.testing.assert_array_equal(lines["rope"].get_ydata(), curves["rope"])
    np.testing.assert_array_equal(lines["rope"].get_xdata(), np.arange(10))
    assert matplotlib.colors.to_hex(lines["rope"].get_color()) == COLORS["rope"]
    assert matplotlib.colors.to_hex(lines["ALiBi slopes"].get_color()) == COLORS["alibi"]  # first word, any case
    assert lines["training length 5"].get_xdata()[0] == 4.5  # between the last trained and the first new position
    assert lines["entropy rate 0.500"].get_ydata()[0] == 0.5
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["rope", "ALiBi slopes", "training length 5", "entropy rate 0.500"]


def test_attention_plot_colorbar_can_be_left_out_for_a_shared_one():
    w = torch.softmax(torch.randn(3, 3), -1)
    fig, axes = plt.subplots(1, 2)
    plot_attention(w, ax=axes[0])
    assert len(fig.axes) == 3 and fig.axes[2].get_ylabel() == "weight"  # its own colour bar by default
    fig, axes = plt.subplots(1, 2)
    for ax in axes:
        plot_attention(w, ax=ax, colorbar=False)
    assert len(fig.axes) == 2  # no colour bar drawn
    assert all(ax.get_images()[0].get_clim() == pytest.approx((0.0, float(w.max()))) for ax in axes)
    with pytest.raises(TypeError, match="colorbar"):
        plot_attention(w, colorbar="no")


def test_attention_plot_rejects_3d():
    with pytest.raises(ValueError, match="q_len"):
        plot_attention(np.ones((2, 3, 3)))
