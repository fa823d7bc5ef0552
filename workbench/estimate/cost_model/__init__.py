"""The cost model: the one composition of model/, memory/ and time/ over a grid of layouts (a single
estimate is a grid of one row): the block table, the rows, the memory pass, the time pass and
``compose.evaluate``. The planner, the scaling curves and ``estimate.single`` call it. Its
modules and tests: the index, ``workbench/estimate/__init__.py``."""
