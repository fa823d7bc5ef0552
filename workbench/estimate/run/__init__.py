"""The whole run: throughput, MFU, time to train, power, energy and cost; whether one node can be
built; the verdict a person reads first. It reads model/, memory/ and time/ (the records).
Its modules and tests: the index, ``workbench/estimate/__init__.py``."""
