"""Documents read within limits (``text``) and their fields read with one-line problems
(``fields``): the low-level reading every document of the workbench goes through."""
