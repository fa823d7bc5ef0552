"""ipywidgets views of the workbench: they edit a scenario and show what the backend returns.

Widgets never compute estimates; they call ``workbench``.
"""
from widgets.scenario_editor import ScenarioEditor

__all__ = ["ScenarioEditor"]
