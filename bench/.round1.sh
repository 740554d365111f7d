set -uo pipefail
source .device/env.sh
out=$OUT
.device/test_sph_kernels 2>&1 | tail -1
for n in 1 2; do mpirun -n $n .device/test_exchange 2>&1 | grep -E "PASSED|FAILED" | head -3; done
b() { python3 bench/sph_throughput.py --apron .device/apron --steps 100 --repeat 3 "$@" 2>&1 | tail -1; }
b --particles 10e6 --json $out/one.json
b --ranks 2 --per-rank --particles 10e6 --json $out/weak.json
b --ranks 2 --particles 10e6 --json $out/strong.json
NCCL_MAX_CTAS=4 b --ranks 2 --per-rank --particles 10e6 --json $out/weak4.json
python3 - <<'P'
import json,os
for f in ['one','weak','strong','weak4']:
    r=json.load(open(os.environ['OUT']+f'/{f}.json'))[0]
    print(f, round(r['median_seconds_per_step']*1e3,3), 'halo transport ms/step', round(r['halo_seconds_per_step']*1e3,3), 'MB/step', r['halo_bytes_sent_per_step']/1e6)
    print({k: round(v['max_seconds']*10,3) for k,v in r['phases'].items() if 'check' not in k and 'setup' not in k})
P
