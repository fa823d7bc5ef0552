"""plotly FigureWidget charts of what the backend returns (estimates, plans, trials, benchmarks).

Each chart holds ``.widget`` (a ``plotly.graph_objects.FigureWidget``) and an ``update(...)``
that redraws it from a backend result in one batch; none computes an estimate itself.
"""
