# A Catalyst script that is not valid Python: it cannot be loaded.


def catalyst_execute(info)
    print(info.timestep)
