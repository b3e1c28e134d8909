"""The columns skew_group's plan adds between its steps (names starting with ``__sg_`` are
reserved: ``_checks.check_keys`` refuses a DataFrame that has one)."""

WORKER = "__sg_worker"      # the row's worker (tag), the partial row's worker (partial)
SUMMARY = "__sg_summary"    # streams: the tag's figures for the observed metrics on one row
                            # per task, else null; gone before the placement's shuffle
PLACE = "__sg_place"        # the value whose Spark hash lands on the row's worker (placement)
ROWS = "__sg_rows"          # input rows behind a partial row (observed metrics)
RESERVED_PREFIX = "__sg_"
