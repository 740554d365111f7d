set -uo pipefail
source .device/env.sh
out=$OUT
OUT=$out/check bash bench/gpu_check.sh > $out/check.txt 2>&1; echo "gpu_check exit $?"; grep -E "FAILED|ok$|PASSED" $out/check.txt | sort | uniq -c | head -20
b() { python3 bench/sph_throughput.py --apron .device/apron --steps 100 --repeat 3 "$@" 2>&1 | tail -1; }
b --particles 10e6 --json $out/one.json
b --ranks 2 --per-rank --particles 10e6 --json $out/weak.json
python3 - <<'P'
import json,os
for f in ['one','weak']:
    r=json.load(open(os.environ['OUT']+f'/{f}.json'))[0]
    print(f, round(r['median_seconds_per_step']*1e3,3), r['device_bytes_per_particle_by_use'])
P
