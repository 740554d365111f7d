# script-version: 2.0
# Catalyst Live on, pointed at the client that tests/catalyst/live_client.py started: it sets
# APRON_LIVE_URL (host:port) for the run.
import os

from paraview.simple import *
from paraview import catalyst

particles = TrivialProducer(registrationName='particles')

options = catalyst.Options()
options.EnableCatalystLive = 1
options.CatalystLiveURL = os.environ['APRON_LIVE_URL']
options.CatalystLiveTrigger = 'TimeStep'
options.CatalystLiveTrigger.Frequency = 1


def catalyst_execute(info):
    print(f"live script: step {info.timestep}")
