"""The model's shapes and parameter counts: what a layer holds and computes, before any bytes or
seconds. It reads the catalog and the scenario only; memory/, time/ and the cost model read it.
Its modules and tests: the index, ``workbench/estimate/__init__.py``."""
