// The store's internal spelling of neardup::Env (neardup/env.h): the file layer the log, segment
// and MANIFEST writers take. An alias only, so that files written against it need not change.
#ifndef NEARDUP_STORE_FILE_SYSTEM_H_
#define NEARDUP_STORE_FILE_SYSTEM_H_

#include "neardup/env.h"

namespace neardup::store {

using FileSystem = ::neardup::Env;
using WritableFile = ::neardup::WritableFile;

}  // namespace neardup::store

#endif  // NEARDUP_STORE_FILE_SYSTEM_H_
