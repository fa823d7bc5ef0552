"""The hardware a scenario runs on: its records (``types``), resolved in one place from catalog
keys, inline tables or measured machine profiles (``resolve``); the profiles' files, where they
are looked up (``locate``), what they may hold (``record``) and what they answer the estimator
(``profile``, ``gpu_profile``). ``workbench calibrate`` writes the profiles."""
