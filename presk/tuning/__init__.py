"""Choosing and measuring layouts: the calibration spaces and their measurement."""
