"""Mean of `mean_jerk` (m/s³) over each second of `eddies run` stats files (steps 1-2 have no history)."""
import json
import sys

for path in sys.argv[1:]:
    rows = [json.loads(line) for line in open(path)]
    seconds = int(round(rows[-1]["time"]))
    means = []
    for k in range(seconds):
        q = [r["mean_jerk"] for r in rows if r["step"] > 2 and k < r["time"] <= k + 1 + 1e-9]
        means.append(sum(q) / len(q))
    print(f"{path:40s}", " ".join(f"{m:.3f}" for m in means))
