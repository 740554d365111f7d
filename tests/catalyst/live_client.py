"""Plays the ParaView GUI's part in Catalyst Live (Catalyst > Connect) and runs a simulation
that connects to it; checks that the simulation's `particles` source reaches the client with
its data.

usage: pvpython --no-mpi live_client.py --particles N [--source NAME] [--timeout S] -- COMMAND...

The client listens on a free port (paraview.live.ConnectToCatalyst: a vtkLiveInsituLink in
visualization mode, as in the GUI), then runs COMMAND with APRON_LIVE_URL=localhost:PORT in its
environment (tests/catalyst/live_connect.py points options.CatalystLiveURL at it). While the
simulation runs, the client processes the link's notifications (the simulation waits for them
at each Live update), and once the simulation's pipeline state names the source it extracts it
(paraview.live.ExtractCatalystData, as the GUI's eye icon does) and updates it until N points
arrive. Passes when the source was extracted with N points and COMMAND exits with status 0.
COMMAND runs in its own process group, killed on the timeout; its output is printed at the end.
--no-mpi: Debian's pvpython otherwise starts as an Open MPI singleton, and the OMPI_*/PMIX_*
variables that leaves in the environment make the mpirun of COMMAND fail (status 1, no output).
"""
import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

from paraview import live

p = argparse.ArgumentParser()
p.add_argument("--particles", type=int, required=True)
p.add_argument("--source", default="particles")
p.add_argument("--timeout", type=float, default=60)
p.add_argument("command", nargs=argparse.REMAINDER)
args = p.parse_args()
command = args.command[1:] if args.command[:1] == ["--"] else args.command
if os.environ.get("OMPI_MCA_ess") == "singleton":
    sys.exit("FAIL: pvpython started MPI (an Open MPI singleton): run it with --no-mpi")


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return s.getsockname()[1]


port = free_port()
link = live.ConnectToCatalyst("localhost", port)  # listens on PORT from here on
print(f"live client: listening on port {port}", flush=True)

log = tempfile.TemporaryFile(mode="w+")
env = dict(os.environ, APRON_LIVE_URL=f"localhost:{port}")
run = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env,
                       start_new_session=True)
start = time.monotonic()
extract = None
points = 0
arrays = []
timed_out = False
while run.poll() is None:
    if time.monotonic() - start > args.timeout:
        timed_out = True
        os.killpg(run.pid, signal.SIGKILL)
        run.wait()
        break
    live.ProcessServerNotifications()
    if extract is None:
        if link.GetInsituProxyManager().GetProxy("sources", args.source) is not None:
            print(f"live client: simulation connected, its pipeline has `{args.source}` "
                  f"({time.monotonic() - start:.1f} s)", flush=True)
            extract = live.ExtractCatalystData(link, args.source)
    elif points != args.particles:
        extract.UpdatePipeline()
        info = extract.GetDataInformation()
        points = info.GetNumberOfPoints()
        if points == args.particles:
            arrays = sorted(extract.PointData.keys())
            print(f"live client: extract of `{args.source}` has {points} points, point arrays "
                  f"{arrays} ({time.monotonic() - start:.1f} s)", flush=True)
    time.sleep(0.01)

log.seek(0)
print(log.read())
problems = []
if timed_out:
    problems.append(f"command still running after {args.timeout} s: killed")
elif run.returncode != 0:
    problems.append(f"command exit status {run.returncode}")
if extract is None:
    problems.append(f"the simulation never sent a pipeline with `{args.source}`")
elif points != args.particles:
    problems.append(f"extract of `{args.source}` has {points} points, expected {args.particles}")
if problems:
    sys.exit("FAIL: " + "; ".join(problems))
print("ok")
