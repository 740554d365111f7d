# A plain Catalyst script (no extractors, just catalyst_execute) that fails from step 10 on: the
# tests check that the run goes on and the log names this script and the error, or, with
# catalyst.fail_on_error, that the run stops with a clear message.


def catalyst_execute(info):
    if info.timestep >= 10:
        particles_seen = info.timestep * 2
        raise RuntimeError(f"deliberate failure at step {info.timestep} ({particles_seen})")
