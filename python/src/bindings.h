// What the source files of the Python module share: the keyword-to-options parser and the
// Status-to-exception mapping of module.cc, and the registration of the other files' functions.
#ifndef NEARDUP_PYTHON_BINDINGS_H_
#define NEARDUP_PYTHON_BINDINGS_H_

#include <pybind11/pybind11.h>

#include "neardup/dedup.h"
#include "neardup/status.h"

namespace neardup::python {

// The DedupOptions of `neardup dedup` keywords (module.cc; ValueError / TypeError on bad ones).
DedupOptions DedupOptionsFromKeywords(const pybind11::dict& kwargs);

// Raises the Python exception of a failed Status (module.cc: ValueError, OSError, ...).
[[noreturn]] void ThrowStatus(const Status& status);

// The dedup stages (neardup/dedup_stages.h) as neardup._neardup.stages (stages_bindings.cc).
void RegisterStageBindings(pybind11::module_& m);

// neardup.dask's array-level calls (dask_bindings.cc).
void RegisterDaskBindings(pybind11::module_& m);

}  // namespace neardup::python

#endif  // NEARDUP_PYTHON_BINDINGS_H_
