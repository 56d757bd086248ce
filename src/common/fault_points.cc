#include "common/fault_points.h"

#include <mutex>

namespace tkv {

namespace {

// Read from server and writer threads while a test may set them.
std::mutex& points_mutex() {
  static std::mutex m;
  return m;
}

FaultPoints& points_storage() {
  static FaultPoints points;
  return points;
}

}  // namespace

FaultPoints fault_points() {
  std::lock_guard<std::mutex> lock(points_mutex());
  return points_storage();
}

void set_fault_points(const FaultPoints& points) {
  std::lock_guard<std::mutex> lock(points_mutex());
  points_storage() = points;
}

}  // namespace tkv
