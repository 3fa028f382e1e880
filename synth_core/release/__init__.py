"""What leaves the machine with a synthetic table: the privacy report (privacy_report), and
fairness-controlled generation (fair_sampling)."""
