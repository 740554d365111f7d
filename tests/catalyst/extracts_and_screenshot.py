# script-version: 2.0
# A Catalyst script as ParaView's GUI exports them (File > Save Catalyst State), written for the
# apron tests: every 10 steps a parallel data extract of the particles and a PNG of them,
# coloured by speed, into OUTPUT/extracts/.
from paraview.simple import *
from paraview import catalyst

# apron's channel: the particles of every rank, with all their fields as point data.
particles = TrivialProducer(registrationName='particles')

view = CreateView('RenderView')
view.ViewSize = [480, 320]
view.OrientationAxesVisibility = 0
view.CameraPosition = [0.29, -1.2, 0.15]
view.CameraFocalPoint = [0.29, 0.02, 0.15]
view.CameraViewUp = [0.0, 0.0, 1.0]
view.UseColorPaletteForBackground = 0
view.Background = [1.0, 1.0, 1.0]

shown = Show(particles, view)
shown.Representation = 'Points'
shown.PointSize = 3.0
ColorBy(shown, ('POINTS', 'velocity', 'Magnitude'))
speed = GetColorTransferFunction('velocity')
speed.RescaleTransferFunction(0.0, 2.0)

data = CreateExtractor('VTP', particles, registrationName='particle_data')
data.Trigger = 'TimeStep'
data.Trigger.Frequency = 10
data.Writer.FileName = 'particles_{timestep:06d}.pvtp'

image = CreateExtractor('PNG', view, registrationName='particle_image')
image.Trigger = 'TimeStep'
image.Trigger.Frequency = 10
image.Writer.FileName = 'particles_{timestep:06d}.png'
image.Writer.ImageResolution = [480, 320]

options = catalyst.Options()
options.ExtractsOutputDirectory = 'extracts'
options.GlobalTrigger = 'TimeStep'
options.GlobalTrigger.Frequency = 1
