"""The standard figures of a sweep (or of runs read together) and a Markdown page that shows
them: ``netsim report``.

:func:`write_report` collects the runs (:func:`netsim.analysis.collect.collect`), draws the
figures whose tables the runs have — walk counts, accuracy, regret, privacy spent, online
nodes — and writes ``report.md`` with the grid, the failed runs, a table of the one-row summary
metrics per grid point and the figures. The package is split by what each part does:

- :mod:`~netsim.analysis.report.styles`: how each grid point is named and drawn (labels from
  the parameters a sweep varies or the scenario keys that differ, colours, line styles);
- :mod:`~netsim.analysis.report.curves`: a curve's statistics per grid point and x (binning
  of long series, mean and interval over repetitions, the yardsticks' values);
- :mod:`~netsim.analysis.report.drawing`: a curve figure's panels, bands, legend and title;
- :mod:`~netsim.analysis.report.comparison`: the comparison of learning runs (privacy
  setting in a caption line, seeds as a band, time, passes or messages on the x axis, the
  central-DP yardstick at each run's own guarantee), with
  :mod:`~netsim.analysis.report.setting` (a run's privacy setting and data, the yardstick at
  its guarantee) and :mod:`~netsim.analysis.report.axes` (passes and messages as x axes);
- :mod:`~netsim.analysis.report.privacy` and :mod:`~netsim.analysis.report.distance`: the
  privacy spent, and privacy per observer against distance (worst pair and quantiles, exact
  figures and upper bounds apart);
- :mod:`~netsim.analysis.report.figures`: which figures a report draws;
- :mod:`~netsim.analysis.report.markdown`: the page's tables and text;
- :mod:`~netsim.analysis.report.page`: :func:`write_report`, the entry point.

Every line of a figure is one grid point: the mean over its repetitions, with a band for the
Student t confidence interval of the mean when it has several
(:func:`netsim.analysis.collect.summarize`), or in the comparison of learning runs from the
lowest to the highest seed. Time axes are in seconds, minutes, hours or days by the runs'
simulated duration (:func:`netsim.plotting.time_unit`).

The names below were importable from ``netsim.analysis.report`` when it was one module, and
stay so.
"""

from netsim.analysis.report.axes import X_AXES
from netsim.analysis.report.comparison import mixed_learning
from netsim.analysis.report.curves import (
    CHOOSE_BINNING,
    LONG_SERIES_SAMPLES,
    MAX_LONG_SERIES_BINS,
    MAX_TIME_BINS,
    NICE_TIME_WIDTHS,
    BaselineLine,
    Binning,
    CurveStatistics,
    baseline_lines,
    curve_binning,
    curve_statistics,
)
from netsim.analysis.report.distance import PAIRWISE_FIGURE
from netsim.analysis.report.drawing import BASELINE_COLOURS, LOG_Y_OVER_DECADES
from netsim.analysis.report.figures import (
    NETWORK_FIGURES,
    TABLE_FIGURE_PANELS,
    TABLE_FIGURE_PREFIX,
    builtin_figures,
    component_figures,
    draw_figures,
    prefixed_figure,
    simulated_span,
    table_figures,
)
from netsim.analysis.report.markdown import (
    AUDIT_HEADER,
    FINAL_ACCURACY_ROW,
    YARDSTICK_KEYS,
    bound_audit_lines,
    failure_lines,
    final_accuracies,
    grid_lines,
    summary_lines,
)
from netsim.analysis.report.page import REPORT_DIR, REPORT_FILE, write_report
from netsim.analysis.report.privacy import PRIVACY_FIGURE
from netsim.analysis.report.styles import (
    BAND_FROM_REPETITIONS,
    CONFIDENCE,
    LINE_STYLES,
    MARKERS,
    LineStyle,
    point_labels,
    point_styles,
    repetitions_text,
    run_point_labels,
    short_names,
    varying_parameters,
)

__all__ = [
    "AUDIT_HEADER",
    "BAND_FROM_REPETITIONS",
    "BASELINE_COLOURS",
    "CHOOSE_BINNING",
    "CONFIDENCE",
    "FINAL_ACCURACY_ROW",
    "LINE_STYLES",
    "LOG_Y_OVER_DECADES",
    "LONG_SERIES_SAMPLES",
    "MARKERS",
    "MAX_LONG_SERIES_BINS",
    "MAX_TIME_BINS",
    "NETWORK_FIGURES",
    "NICE_TIME_WIDTHS",
    "PAIRWISE_FIGURE",
    "PRIVACY_FIGURE",
    "REPORT_DIR",
    "REPORT_FILE",
    "TABLE_FIGURE_PANELS",
    "TABLE_FIGURE_PREFIX",
    "X_AXES",
    "YARDSTICK_KEYS",
    "BaselineLine",
    "Binning",
    "CurveStatistics",
    "LineStyle",
    "baseline_lines",
    "bound_audit_lines",
    "builtin_figures",
    "component_figures",
    "curve_binning",
    "curve_statistics",
    "draw_figures",
    "failure_lines",
    "final_accuracies",
    "grid_lines",
    "mixed_learning",
    "point_labels",
    "point_styles",
    "prefixed_figure",
    "repetitions_text",
    "run_point_labels",
    "short_names",
    "simulated_span",
    "summary_lines",
    "table_figures",
    "varying_parameters",
    "write_report",
]
