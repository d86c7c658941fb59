"""Control: predictors and their selection, planning, stabilisation, Stela, grouping, decisions."""
