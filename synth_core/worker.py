"""The background training process: `python -m synth_core.worker RUN_DIR` (started by synth_core.runs.jobs).

It reads the run's request and private rows, trains through `api.fit` (which writes the event log, the
ledger and the status), then samples a review table. It never prints rows: its log holds progress and
error messages only.
"""
from __future__ import annotations

import signal
import sys
import time
import traceback

from .runs import RunDir


def _terminate(signum, frame):  # SIGTERM: stop like Ctrl-C, so the run is marked cancelled and kept
    raise KeyboardInterrupt


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m synth_core.worker RUN_DIR", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _terminate)
    run = RunDir(argv[0]).require()
    try:
        from . import api
        from .runs.jobs import cancel_requested, read_private
        request = run.request()
        table = read_private(run, "train")
        if table is None:
            raise FileNotFoundError("the run's private rows are missing")
        schema = run.schema()
        print(f"{time.strftime('%H:%M:%S')} training {request['model']} on {len(table)} rows", flush=True)
        result = api.fit(table, schema, model=request["model"], epsilon=request["epsilon"],
                         delta=request.get("delta"), accountant=request.get("accountant", "prv"),
                         preset=request.get("preset", "cpu"), options=request.get("options") or {},
                         bounds_epsilon=request.get("bounds_epsilon", 0.0), seed=request.get("seed", 0),
                         device=request.get("device"), run_dir=run,
                         should_stop=lambda: cancel_requested(run))
        rows = int(request.get("review_rows") or min(len(table), 20000))
        state = run.status()
        print(f"{time.strftime('%H:%M:%S')} {state['state']}: {state.get('message')}; sampling {rows} review rows",
              flush=True)
        run.write_sample(result.model.sample(rows, seed=request.get("seed", 0)), run.review_sample.name)
        print(f"{time.strftime('%H:%M:%S')} done", flush=True)
        return 0
    except KeyboardInterrupt:
        if run.status().get("state") in ("created", "running"):
            run.set_status("cancelled", "stopped before training finished")
        return 1
    except BaseException as e:  # api.fit marks failures during training; this catches the rest
        print(f"{type(e).__name__}: {e}", file=sys.stderr, flush=True)
        if run.status().get("state") in ("created", "running"):
            run.set_status("failed", f"{type(e).__name__}: {e}", traceback=traceback.format_exc(limit=5))
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
