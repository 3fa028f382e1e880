"""What leaves the machine with a synthetic table: the CSV a spreadsheet opens safely (export), the
privacy report (privacy_report), and fairness-controlled generation (fair_sampling)."""
