"""What watches a run: the health monitor and its rules (health, alarms), trackers, and report.html."""
