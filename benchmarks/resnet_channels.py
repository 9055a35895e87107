"""Channel groups in a small ResNet: accuracy, FLOPs kept and CPU speed-up of compact().

Model and data as ``examples/plot_resnet_channels.py``: a ResNet of width 8 / 16 (stem,
an identity block, a projection block; batch norm after every conv), scikit-learn's 8x8
digits (75% / 25% split). Two declarations at each lam:

* ``gates="channels"``: one group per channel over every tensor coupled to it (filters,
  batch norms, the shortcut's conv joined by the residual addition);
* ``"filters"``: every conv weight gated per filter (``"out"``), the filter gates as
  before this package traced anything. Since then a batch norm right after a gated conv
  joins its filters' groups automatically, so this row measures filter gates with the
  batch norms coupled, but without the residual coupling (a channel of a residual sum
  stays alive while one of its producers keeps it).

Speed: the median CPU time of forward passes (one thread, thread CPU time, alternating
full and compact) on a batch of 1 image and of all 450 test images, full model over
compact model.

Writes results/resnet_channels.json.
"""

from __future__ import annotations

import argparse
import runpy
import time
import warnings

from _common import RESULTS, ROOT, machine, single_thread, time_forward, uptime, write_json


def run(args):
    import numpy as np
    import torch
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    from sksparse_nn import DGatedNeuralNetClassifier

    single_thread()
    example = runpy.run_path(str(ROOT / "examples" / "plot_resnet_channels.py"), run_name="x")
    resnet = example["ResNet"]
    X, y = load_digits(return_X_y=True)
    X = X.reshape(-1, 1, 8, 8).astype(np.float32)
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, random_state=0)
    convs = [n for n, m in resnet().named_modules() if isinstance(m, torch.nn.Conv2d)]
    declarations = {"channels": "channels", "filters": {f"{c}.weight": "out" for c in convs}}
    records = []
    for lam in args.lams:
        for name, gates in declarations.items():
            clf = DGatedNeuralNetClassifier(
                resnet, gates=gates, lam=lam, lr=0.2, batch_size=128,
                max_epochs=args.epochs, random_state=0,
            )  # fmt: skip
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # groups in transit at the budget's end
                clf.fit(X_tr, y_tr)
            rec = {"declaration": name, "lam": lam, "fit_s": time.perf_counter() - t0}
            rec["acc"] = clf.score(X_te, y_te)
            small, report = clf.compact(return_report=True)
            full = clf.module_.eval()
            xt = torch.as_tensor(X_te, dtype=next(full.parameters()).dtype)
            with torch.no_grad():
                rec["same_classes"] = bool(
                    np.array_equal(small(xt).argmax(1).numpy(), clf.predict(X_te))
                )
            rec["flops_kept"] = report.flops_after / report.flops_before
            rec["params_kept"] = report.params_after / report.params_before
            rec["channels_kept"] = {
                c: [len(report.kept_units[c]), full.module.get_submodule(c).out_channels]
                for c in convs
            }
            for batch in (1, len(xt)):
                tf, ts = time_forward(full, small, xt[:batch], args.repeats)
                rec[f"ms_full_{batch}"], rec[f"ms_compact_{batch}"] = 1e3 * tf, 1e3 * ts
                rec[f"speedup_{batch}"] = tf / ts
            records.append(rec)
            print(
                f"{name:>8} lam={lam:<6g} acc={rec['acc']:.3f} FLOPs kept "
                f"{rec['flops_kept']:.1%} speed-up x{rec['speedup_1']:.2f} (1 image) "
                f"x{rec[f'speedup_{len(xt)}']:.2f} ({len(xt)}) fit {rec['fit_s']:.0f}s",
                flush=True,
            )
    return records


def report(results, out):
    print(f"\nload: {results['uptime_start']} -> {results['uptime_end']}")
    print("| declaration | lam | test acc | FLOPs kept | parameters kept | same classes | "
          "speed-up, 1 image | speed-up, 450 images |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for r in results["records"]:
        print(
            f"| {r['declaration']} | {r['lam']:g} | {r['acc']:.3f} | {r['flops_kept']:.1%} | "
            f"{r['params_kept']:.1%} | {r['same_classes']} | {r['speedup_1']:.2f}x | "
            f"{r['speedup_450']:.2f}x |"
        )
    write_json(results, out)
    print(f"wrote {out}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lams", type=float, nargs="+", default=[0.03, 0.04, 0.05])
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--out", default=str(RESULTS / "resnet_channels.json"))
    args = parser.parse_args()
    start = uptime()
    records = run(args)
    results = {
        "machine": machine(),
        "args": vars(args),
        "uptime_start": start,
        "uptime_end": uptime(),
        "records": records,
    }
    report(results, args.out)


if __name__ == "__main__":
    main()
