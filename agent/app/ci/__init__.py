"""`ooda ci`: a failing CI job -> task -> loop -> suggestion."""
