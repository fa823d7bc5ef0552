"""Charts of what the backend returns (estimates, plans, trials, benchmarks).

Each chart holds ``.widget`` (a ``widgets.charts.plot.Plot``: a plotly figure whose whole JSON
is the widget's state) and an ``update(...)`` that redraws it from a backend result in one
batch; none computes an estimate itself.
"""
