// The prefill progress bar of run and chat on stderr (ProgressFlags picks
// the mode: cli/common_flags.h).
#pragma once

#include "cli/common_flags.h"
#include "runtime/generation.h"

namespace tkv::cli {

// The progress bar for Sequence::set_prefill_observer (empty for kOff).
runtime::PrefillObserver prefill_progress_bar(PrefillProgress mode);

}  // namespace tkv::cli
