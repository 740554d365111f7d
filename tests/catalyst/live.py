# script-version: 2.0
# Catalyst Live switched on, with no ParaView GUI listening: the run must go on regardless.
from paraview.simple import *
from paraview import catalyst

particles = TrivialProducer(registrationName='particles')

options = catalyst.Options()
options.EnableCatalystLive = 1
options.CatalystLiveTrigger = 'TimeStep'
options.CatalystLiveTrigger.Frequency = 5


def catalyst_execute(info):
    print(f"live script: step {info.timestep}")
