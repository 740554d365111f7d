// The Catalyst adaptor of a build without ParaView: it cannot be made, and costs nothing.
#include "io/catalyst_adaptor.hpp"

namespace apron::io {

struct CatalystAdaptor::Impl {};

bool CatalystAdaptor::available() {
  return false;
}

CatalystAdaptor::CatalystAdaptor(MPI_Comm, CatalystSettings) {
  throw std::logic_error(
      "this apron was built without ParaView Catalyst (APRON_ENABLE_CATALYST=OFF or no ParaView "
      "found)");
}

CatalystAdaptor::~CatalystAdaptor() = default;

void CatalystAdaptor::execute(long, double, std::span<const VisualBlock>) {}

}  // namespace apron::io
