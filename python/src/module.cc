// neardup._neardup: the pybind11 binding of the neardup library (fingerprints, keywords, the
// Hamming index, dedup, the persistent store; the dedup stages are in stages_bindings.cc).
//
// Keyword options are the option registry's (neardup/options.h), the table the command-line flags
// are made from too: the same names (a flag's '-' is '_'), defaults and checks. A keyword of the
// wrong type is TypeError, a bad value ValueError, both naming the keyword. A non-ok Status becomes
// ValueError (bad input), OSError (files; FileNotFoundError for a missing one, FileExistsError for
// one that must be new), KeyError (a missing store id) or RuntimeError (a bug), carrying the C++
// message. Besides the public headers it uses the library's thread pool (common/parallel.h),
// whitespace-free hash (dedup/document_hashes.h) and UTF-8 check (common/utf8.h).
// Every call that can take long releases the GIL; batch calls run on all cores.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bindings.h"
#include "common/parallel.h"
#include "common/utf8.h"
#include "dedup/document_hashes.h"
#include "neardup/clusters.h"
#include "neardup/dedup.h"
#include "neardup/dedup_stages.h"
#include "neardup/document_reader.h"
#include "neardup/fingerprinter.h"
#include "neardup/jieba.h"
#include "neardup/minhash_lsh.h"
#include "neardup/options.h"
#include "neardup/output_file.h"
#include "neardup/permuted_index.h"
#include "neardup/report.h"
#include "neardup/shingles.h"
#include "neardup/sketch.h"
#include "neardup/store.h"

namespace py = pybind11;

namespace neardup::python {
namespace {

// ---- errors
// ---------------------------------------------------------------------------------------

// The library's words for what a Python caller sets by keyword (options are named by the registry,
// neardup/options.h).
std::string WithKeywordNames(std::string message) {
  static const std::pair<const char*, const char*> kKeywords[] = {
      {" (OutputFileOptions::force replaces it)", ""},
  };
  for (const auto& [library, keyword] : kKeywords) {
    const size_t at = message.find(library);
    if (at != std::string::npos) message.replace(at, std::string_view(library).size(), keyword);
  }
  return message;
}

[[noreturn]] void Throw(const Status& status, std::string_view context = {}) {
  std::string message = WithKeywordNames(
      context.empty() ? status.message() : std::string(context) + ": " + status.message());
  switch (status.code()) {
    case StatusCode::kNotFound:
      PyErr_SetString(PyExc_FileNotFoundError, message.c_str());
      throw py::error_already_set();
    case StatusCode::kAlreadyExists:
      PyErr_SetString(PyExc_FileExistsError, message.c_str());
      throw py::error_already_set();
    case StatusCode::kIoError:
    case StatusCode::kCorruption:
      PyErr_SetString(PyExc_OSError, message.c_str());
      throw py::error_already_set();
    case StatusCode::kInternal:
      throw std::runtime_error(message);
    default:
      throw py::value_error(message);
  }
}

void Check(const Status& status, std::string_view context = {}) {
  if (!status.ok()) Throw(status, context);
}

template <typename T>
T Unwrap(Result<T> result, std::string_view context = {}) {
  if (!result.ok()) Throw(result.status(), context);
  return std::move(*result);
}

// ---- texts
// ----------------------------------------------------------------------------------------

// A UTF-8 view of a str (CPython's cached UTF-8 form, valid while the object lives) or bytes.
std::string_view TextView(py::handle object, std::string_view what = "text") {
  if (PyUnicode_Check(object.ptr())) {
    Py_ssize_t size = 0;
    const char* data = PyUnicode_AsUTF8AndSize(object.ptr(), &size);
    if (data == nullptr) throw py::error_already_set();  // lone surrogates: UnicodeEncodeError
    return {data, static_cast<size_t>(size)};
  }
  if (PyBytes_Check(object.ptr())) {
    char* data = nullptr;
    Py_ssize_t size = 0;
    if (PyBytes_AsStringAndSize(object.ptr(), &data, &size) != 0) throw py::error_already_set();
    return {data, static_cast<size_t>(size)};
  }
  throw py::type_error(std::string(what) + ": expected str or bytes, got " +
                       std::string(py::str(py::type::handle_of(object).attr("__name__"))));
}

// Texts of a batch: the objects are kept alive while the views are used without the GIL.
struct TextBatch {
  std::vector<py::object> owners;
  std::vector<std::string_view> views;

  // `mask`: an item that is not a text (None, NaN, a number) or cannot be encoded (a lone
  // surrogate) is marked in `invalid` instead of raising TypeError / UnicodeEncodeError.
  explicit TextBatch(py::handle texts, bool mask = false) {
    if (PyUnicode_Check(texts.ptr()) || PyBytes_Check(texts.ptr())) {
      throw py::type_error("texts: expected a sequence of str, got a single string");
    }
    if (!py::isinstance<py::iterable>(texts)) {
      throw py::type_error("texts: expected a sequence of str, got " +
                           std::string(py::str(py::type::handle_of(texts).attr("__name__"))));
    }
    if (py::hasattr(texts, "__len__")) {
      size_t n = py::len(texts);
      owners.reserve(n);
      views.reserve(n);
    }
    for (py::handle item : py::iter(texts)) {
      owners.push_back(py::reinterpret_borrow<py::object>(item));
      if (!mask) {
        views.push_back(TextView(item, "texts[" + std::to_string(views.size()) + "]"));
        continue;
      }
      invalid.resize(views.size() + 1, false);
      try {
        views.push_back(TextView(item, "texts"));
      } catch (py::error_already_set& e) {
        if (!e.matches(PyExc_UnicodeError)) throw;
        views.emplace_back();
        invalid.back() = true;
      } catch (py::type_error&) {
        views.emplace_back();
        invalid.back() = true;
      }
    }
  }
  size_t size() const { return views.size(); }
  bool is_invalid(size_t i) const { return i < invalid.size() && invalid[i]; }

  std::vector<bool> invalid;  // mask mode: item i is not a text
};

// ---- fingerprints as Python values -----------------------------------------------------------

// The name of an object's type, for error messages.
std::string TypeName(py::handle object) {
  return py::str(py::type::handle_of(object).attr("__name__"));
}

// A Python integer (int or anything with __index__, never bool, float or str) as uint64:
// TypeError for another type, ValueError when negative or wider than 64 bits.
uint64_t UInt64FromObject(py::handle object, const std::string& what) {
  if (PyBool_Check(object.ptr()) || PyFloat_Check(object.ptr()) || PyUnicode_Check(object.ptr()) ||
      PyBytes_Check(object.ptr()) || !PyIndex_Check(object.ptr())) {
    throw py::type_error(what + ": expected a non-negative integer, got " + TypeName(object));
  }
  py::int_ value = py::reinterpret_steal<py::int_>(PyNumber_Index(object.ptr()));
  if (!value) throw py::error_already_set();
  if (PyObject_RichCompareBool(value.ptr(), py::int_(0).ptr(), Py_LT) == 1) {
    throw py::value_error(what + ": " + std::string(py::str(value)) + " is negative");
  }
  const unsigned long long result = PyLong_AsUnsignedLongLong(value.ptr());
  if (result == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
    PyErr_Clear();
    throw py::value_error(what + ": " + std::string(py::str(value)) + " does not fit 64 bits");
  }
  return result;
}

// A sequence or NumPy array of non-negative integers as uint64, checked element by element: a
// float, bool, str or object that is not an integer is a TypeError naming `what` and the index; a
// negative or too wide value a ValueError. Integer arrays are converted without Python objects.
std::vector<uint64_t> UInt64VectorFromObject(py::handle object, const std::string& what) {
  if (PyUnicode_Check(object.ptr()) || PyBytes_Check(object.ptr())) {
    throw py::type_error(what + ": expected a sequence of integers, got " + TypeName(object));
  }
  if (py::isinstance<py::array>(object)) {
    py::array array = py::reinterpret_borrow<py::array>(object);
    const char kind = array.dtype().kind();
    if (array.ndim() > 1) throw py::value_error(what + ": expected a one-dimensional array");
    if (kind == 'u' || kind == 'i') {
      if (kind == 'i') {
        auto signed_values =
            py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(array);
        if (!signed_values) throw py::error_already_set();
        for (py::ssize_t i = 0; i < signed_values.size(); ++i) {
          if (signed_values.data()[i] < 0) {
            throw py::value_error(what + "[" + std::to_string(i) +
                                  "]: " + std::to_string(signed_values.data()[i]) + " is negative");
          }
        }
      }
      auto values = py::array_t<uint64_t, py::array::c_style | py::array::forcecast>::ensure(array);
      if (!values) throw py::error_already_set();
      return std::vector<uint64_t>(values.data(), values.data() + values.size());
    }
    if (kind != 'O') {
      throw py::type_error(what + ": expected an array of integers, got an array of dtype " +
                           std::string(py::str(array.dtype())));
    }
  }
  if (!py::isinstance<py::iterable>(object)) {
    throw py::type_error(what + ": expected a sequence of integers, got " + TypeName(object));
  }
  std::vector<uint64_t> out;
  for (py::handle item : py::iter(object)) {
    out.push_back(UInt64FromObject(item, what + "[" + std::to_string(out.size()) + "]"));
  }
  return out;
}

py::int_ FingerprintToInt(const Fingerprint& fp) {
  if (fp.bits == 64) return py::int_(fp.lo);
  py::int_ hi(fp.hi);
  py::int_ lo(fp.lo);
  return py::reinterpret_steal<py::int_>(
      PyNumber_Or(PyNumber_Lshift(hi.ptr(), py::int_(64).ptr()), lo.ptr()));
}

// An int (64-bit unless bits == 128 or it does not fit 64 bits), a hex/binary/"d:" string, or a
// NumPy row [hi, lo].
Fingerprint FingerprintFromObject(py::handle object, int bits, std::string_view what) {
  if (PyUnicode_Check(object.ptr())) {
    return Unwrap(ParseFingerprint(py::cast<std::string>(object)), what);
  }
  if (PyLong_Check(object.ptr()) || py::isinstance<py::int_>(object) ||
      py::hasattr(object, "__index__")) {
    py::int_ value = py::reinterpret_borrow<py::object>(object).attr("__index__")();
    if (PyObject_RichCompareBool(value.ptr(), py::int_(0).ptr(), Py_LT) == 1) {
      throw py::value_error(std::string(what) + ": a fingerprint cannot be negative");
    }
    py::int_ mask((uint64_t{0} - 1));
    py::int_ low = py::reinterpret_steal<py::int_>(PyNumber_And(value.ptr(), mask.ptr()));
    py::int_ high =
        py::reinterpret_steal<py::int_>(PyNumber_Rshift(value.ptr(), py::int_(64).ptr()));
    uint64_t lo = low.cast<uint64_t>();
    if (PyObject_RichCompareBool(high.ptr(), mask.ptr(), Py_GT) == 1) {
      throw py::value_error(std::string(what) + ": does not fit 128 bits");
    }
    uint64_t hi = high.cast<uint64_t>();
    if (bits == 128 || hi != 0) return Fingerprint::From128(hi, lo);
    return Fingerprint::From64(lo);
  }
  if (py::isinstance<py::array>(object) || py::isinstance<py::tuple>(object) ||
      py::isinstance<py::list>(object)) {
    std::vector<uint64_t> row = UInt64VectorFromObject(object, std::string(what));
    if (row.size() == 2) return Fingerprint::From128(row[0], row[1]);
    if (row.size() == 1) return Fingerprint::From64(row[0]);
  }
  throw py::type_error(std::string(what) +
                       ": expected an int, a hex string or a [hi, lo] pair of a 128-bit value");
}

// A NumPy uint64 array of n fingerprints: shape (n,) for 64 bits, (n, 2) [hi, lo] for 128.
std::vector<Fingerprint> FingerprintsFromArray(py::handle object, int bits) {
  // Only integers (no floats, strings or negative values wrapped round): a 1-D sequence is
  // checked element by element, a 2-D array by its dtype and sign.
  py::array_t<uint64_t, py::array::c_style> array;
  if (py::isinstance<py::array>(object) && py::reinterpret_borrow<py::array>(object).ndim() == 2) {
    py::array given = py::reinterpret_borrow<py::array>(object);
    const char kind = given.dtype().kind();
    if (kind != 'u' && kind != 'i') {
      throw py::type_error("fingerprints: expected an array of integers, got dtype " +
                           std::string(py::str(given.dtype())));
    }
    if (kind == 'i') {
      auto signed_values =
          py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(given);
      for (py::ssize_t i = 0; i < signed_values.size(); ++i) {
        if (signed_values.data()[i] < 0) throw py::value_error("fingerprints: negative value");
      }
    }
    array = py::array_t<uint64_t, py::array::c_style | py::array::forcecast>::ensure(given);
  } else {
    std::vector<uint64_t> values = UInt64VectorFromObject(object, "fingerprints");
    array = py::array_t<uint64_t, py::array::c_style>(static_cast<py::ssize_t>(values.size()));
    if (!values.empty()) {
      std::memcpy(array.mutable_data(), values.data(), values.size() * sizeof(uint64_t));
    }
  }
  if (!array) throw py::type_error("fingerprints: expected an array of uint64");
  std::vector<Fingerprint> out;
  if (array.ndim() == 1) {
    if (bits == 128) {
      throw py::value_error("fingerprints: 128-bit fingerprints are an (n, 2) array [hi, lo]");
    }
    auto view = array.unchecked<1>();
    out.reserve(view.shape(0));
    for (py::ssize_t i = 0; i < view.shape(0); ++i) out.push_back(Fingerprint::From64(view(i)));
  } else if (array.ndim() == 2 && array.shape(1) == 2) {
    if (bits == 64) {
      throw py::value_error("fingerprints: 64-bit fingerprints are a one-dimensional array");
    }
    auto view = array.unchecked<2>();
    out.reserve(view.shape(0));
    for (py::ssize_t i = 0; i < view.shape(0); ++i) {
      out.push_back(Fingerprint::From128(view(i, 0), view(i, 1)));
    }
  } else {
    throw py::value_error("fingerprints: expected shape (n,) or (n, 2)");
  }
  return out;
}

py::array FingerprintArray(const std::vector<Fingerprint>& fps, int bits) {
  if (bits == 64) {
    py::array_t<uint64_t> out(static_cast<py::ssize_t>(fps.size()));
    auto view = out.mutable_unchecked<1>();
    for (size_t i = 0; i < fps.size(); ++i) view(i) = fps[i].lo;
    return out;
  }
  py::array_t<uint64_t> out({static_cast<py::ssize_t>(fps.size()), py::ssize_t{2}});
  auto view = out.mutable_unchecked<2>();
  for (size_t i = 0; i < fps.size(); ++i) {
    view(i, 0) = fps[i].hi;
    view(i, 1) = fps[i].lo;
  }
  return out;
}

std::vector<uint64_t> IdsFromObject(py::handle object, size_t n) {
  if (object.is_none()) {
    std::vector<uint64_t> ids(n);
    for (size_t i = 0; i < n; ++i) ids[i] = i;
    return ids;
  }
  std::vector<uint64_t> ids = UInt64VectorFromObject(object, "ids");
  if (ids.size() != n) {
    throw py::value_error("ids: " + std::to_string(ids.size()) + " ids for " + std::to_string(n) +
                          " fingerprints");
  }
  return ids;
}

template <typename T>
py::array_t<T> ToArray(const std::vector<T>& values) {
  py::array_t<T> out(static_cast<py::ssize_t>(values.size()));
  if (!values.empty()) std::memcpy(out.mutable_data(), values.data(), values.size() * sizeof(T));
  return out;
}

// A thread count: 0 (all cores) or more. TypeError for a non-integer, ValueError below 0.
int Threads(py::handle value) {
  if (PyBool_Check(value.ptr()) || !PyIndex_Check(value.ptr())) {
    throw py::type_error("threads: expected an int, got " + TypeName(value));
  }
  const long long threads = py::cast<long long>(value);
  if (threads < 0 || threads > 1 << 16) {
    throw py::value_error("threads: must be 0 (all cores) or more, got " + std::to_string(threads));
  }
  return static_cast<int>(threads);
}
int Threads(int threads) { return Threads(py::int_(threads)); }

// ---- options (the option registry, neardup/options.h) -------------------------------------------

[[noreturn]] void ThrowTypeError(const std::string& name, const char* expected, py::handle value) {
  throw py::type_error(name + ": expected " + expected + ", got " + TypeName(value));
}

// Sets the registry option the keyword `name` names, if it is one of `scopes`, from a Python value:
// TypeError naming it for a value of another type, ValueError for a bad value. None leaves the
// option unset (its default). Returns false when `name` is no such option.
bool SetKeyword(const std::string& name, py::handle value, uint32_t scopes, OptionValues* values) {
  const OptionSpec* spec = FindFlag(name);
  if (spec == nullptr || !(spec->scope & scopes)) return false;
  if (name == "max_distance" &&
      PyErr_WarnEx(PyExc_DeprecationWarning, "max_distance is deprecated: use k", 1) != 0) {
    throw py::error_already_set();
  }
  if (value.is_none()) return true;
  const bool is_bool = PyBool_Check(value.ptr());
  const bool is_int = !is_bool && (PyLong_Check(value.ptr()) || py::hasattr(value, "__index__"));
  OptionValue converted;
  switch (spec->type) {
    case OptionType::kBool:
      if (!is_bool && !py::isinstance(value, py::module_::import("numpy").attr("bool_"))) {
        ThrowTypeError(name, "True or False", value);
      }
      converted = py::cast<bool>(value);
      break;
    case OptionType::kInt: {
      if (!is_int || PyFloat_Check(value.ptr())) ThrowTypeError(name, "an int", value);
      const py::object index = py::reinterpret_borrow<py::object>(value).attr("__index__")();
      int overflow = 0;
      const long long v = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
      if (overflow != 0) {
        throw py::value_error(name + ": " + std::string(py::str(index)) + " is out of range");
      }
      converted = static_cast<int64_t>(v);
      break;
    }
    case OptionType::kDouble:
      if (is_bool || PyUnicode_Check(value.ptr()) ||
          !(is_int || PyFloat_Check(value.ptr()) || py::hasattr(value, "__float__"))) {
        ThrowTypeError(name, "a number", value);
      }
      converted = py::cast<double>(py::float_(py::reinterpret_borrow<py::object>(value)));
      break;
    case OptionType::kPath:
      if (!PyUnicode_Check(value.ptr()) && !py::hasattr(value, "__fspath__")) {
        ThrowTypeError(name, "a str or os.PathLike", value);
      }
      converted = py::cast<std::string>(py::module_::import("os").attr("fspath")(value));
      break;
    case OptionType::kString:
    case OptionType::kChoice:
      if (!PyUnicode_Check(value.ptr())) ThrowTypeError(name, "a str", value);
      converted = py::cast<std::string>(value);
      break;
  }
  Check(values->Set(name, converted));
  return true;
}

[[noreturn]] void UnknownOption(const std::string& name) {
  throw py::type_error("unexpected option '" + name + "'");
}

// A DeprecationWarning (an exception when warnings are errors).
void WarnDeprecated(const std::string& message) {
  if (PyErr_WarnEx(PyExc_DeprecationWarning, message.c_str(), 2) != 0) {
    throw py::error_already_set();
  }
}

// The registry options of `scopes` given as keywords; TypeError for any other keyword. An old
// name (max_k) is accepted with a DeprecationWarning.
OptionValues KeywordValues(const py::dict& kwargs, uint32_t scopes) {
  OptionValues values(OptionNaming::kKeyword);
  for (auto [key, value] : kwargs) {
    if (!PyUnicode_Check(key.ptr())) throw py::type_error("keywords must be strings");
    const std::string name = py::cast<std::string>(key);
    if (!SetKeyword(name, value, scopes, &values)) UnknownOption(name);
  }
  for (const std::string& message : values.deprecated()) WarnDeprecated(message);
  return values;
}

struct ParsedFingerprintOptions {
  FingerprintOptions options;
  int threads = 0;
};

// Fingerprinter(**kwargs): the fingerprint options and the thread count.
ParsedFingerprintOptions ParseFingerprintOptions(const py::dict& kwargs) {
  py::dict fingerprint_keywords;
  ParsedFingerprintOptions parsed;
  OptionValues threads(OptionNaming::kKeyword);
  for (auto [key, value] : kwargs) {
    if (PyUnicode_Check(key.ptr()) && py::cast<std::string>(key) == "threads") {
      SetKeyword("threads", value, kReaderScope, &threads);
    } else {
      fingerprint_keywords[key] = value;
    }
  }
  if (const OptionValue* t = threads.Find("threads")) parsed.threads = std::get<int64_t>(*t);
  const OptionValues values = KeywordValues(fingerprint_keywords, kFingerprintScope);
  Check(values.ApplyTo(&parsed.options));
  return parsed;
}

// dedup(**kwargs) and the dedup stages: fingerprint, reading and dedup options.
DedupOptions ParseDedupOptions(const py::dict& kwargs) {
  const OptionValues values = KeywordValues(kwargs, kFingerprintScope | kReaderScope | kDedupScope);
  DedupOptions options;
  Check(values.ApplyTo(&options));
  return options;
}

// The options in force as keywords (what Fingerprinter.options shows).
py::dict OptionsDict(const FingerprintOptions& options) {
  py::dict out;
  for (const auto& [name, value] : FingerprintOptionsInForce(options)) {
    std::visit([&](const auto& v) { out[py::str(name)] = py::cast(v); }, value);
  }
  return out;
}

// ---- Fingerprinter
// --------------------------------------------------------------------------------

class PyFingerprinter {
 public:
  explicit PyFingerprinter(const py::dict& kwargs) : kwargs_(kwargs) {
    ParsedFingerprintOptions parsed = ParseFingerprintOptions(kwargs);
    threads_ = parsed.threads;
    {
      py::gil_scoped_release release;
      auto created = Fingerprinter::Create(parsed.options);
      if (!created.ok()) {
        py::gil_scoped_acquire acquire;
        Throw(created.status());
      }
      engine_ = std::move(*created);
    }
  }

  const Fingerprinter& engine() const { return *engine_; }
  int bits() const { return engine_->options().bits; }
  int threads() const { return threads_; }
  const py::dict& kwargs() const { return kwargs_; }

  py::int_ Compute(py::handle text) const {
    std::string_view view = TextView(text);
    Result<Fingerprint> fp = Status::Internal("unset");
    {
      py::gil_scoped_release release;
      fp = engine_->Compute(view);
    }
    return FingerprintToInt(Unwrap(std::move(fp)));
  }

  // Fingerprints of a batch on all cores; errors[i] is ok for the ones computed.
  void ComputeBatch(const TextBatch& batch, std::vector<Fingerprint>* fps,
                    std::vector<Status>* errors) const {
    py::gil_scoped_release release;
    fps->assign(batch.size(), Fingerprint{0, 0, bits()});
    errors->assign(batch.size(), Status::Ok());
    ParallelFor(
        batch.size(), threads_,
        [&](size_t begin, size_t end) {
          for (size_t i = begin; i < end; ++i) {
            if (batch.is_invalid(i)) {
              (*errors)[i] = Status::InvalidArgument("not a str or bytes");
              continue;
            }
            auto fp = engine_->Compute(batch.views[i]);
            if (fp.ok()) {
              (*fps)[i] = *fp;
            } else {
              (*errors)[i] = fp.status();
            }
          }
        },
        16);
  }

  py::object ComputeBatchPy(py::handle texts, const std::string& errors_mode) const {
    if (errors_mode != "raise" && errors_mode != "mask") {
      throw py::value_error("errors: expected \"raise\" or \"mask\"");
    }
    TextBatch batch(texts, /*mask=*/errors_mode == "mask");
    std::vector<Fingerprint> fps;
    std::vector<Status> errors;
    ComputeBatch(batch, &fps, &errors);
    py::array values = FingerprintArray(fps, bits());
    if (errors_mode == "raise") {
      for (size_t i = 0; i < errors.size(); ++i) {
        if (!errors[i].ok()) Throw(errors[i], "texts[" + std::to_string(i) + "]");
      }
      return values;
    }
    py::array_t<bool> ok(static_cast<py::ssize_t>(errors.size()));
    auto view = ok.mutable_unchecked<1>();
    for (size_t i = 0; i < errors.size(); ++i) view(i) = errors[i].ok();
    return py::make_tuple(values, ok);
  }

  py::list Features(py::handle text, size_t top_k) const {
    std::string_view view = TextView(text);
    Result<std::vector<WeightedFeature>> features = Status::Internal("unset");
    {
      py::gil_scoped_release release;
      features = engine_->Features(view);
    }
    auto list = Unwrap(std::move(features));
    py::list out;
    for (size_t i = 0; i < list.size() && (top_k == 0 || i < top_k); ++i) {
      out.append(py::make_tuple(list[i].text, list[i].weight));
    }
    return out;
  }

  int TextDistance(py::handle a, py::handle b) const {
    std::string_view va = TextView(a, "a");
    std::string_view vb = TextView(b, "b");
    Result<Fingerprint> fa = Status::Internal("unset");
    Result<Fingerprint> fb = Status::Internal("unset");
    {
      py::gil_scoped_release release;
      fa = engine_->Compute(va);
      fb = engine_->Compute(vb);
    }
    return HammingDistance(Unwrap(std::move(fa), "a"), Unwrap(std::move(fb), "b"));
  }

  // What dedup records of each document, for the Dask pipeline: ok, fingerprint, text bytes,
  // content hash (XXH3 of the raw text) and squeezed hash, all computed on all cores.
  // `normalized`: also the bytes of each normalised text (what --keep longest compares).
  py::dict Records(py::handle texts, bool normalized) const {
    TextBatch batch(texts);
    const size_t n = batch.size();
    std::vector<Fingerprint> fps;
    std::vector<Status> errors;
    ComputeBatch(batch, &fps, &errors);
    std::vector<uint64_t> bytes(n), content(n), squeezed(n), normalized_bytes(n);
    std::vector<uint8_t> ok(n);
    {
      py::gil_scoped_release release;
      ParallelFor(
          n, threads_,
          [&](size_t begin, size_t end) {
            for (size_t i = begin; i < end; ++i) {
              std::string_view text = batch.views[i];
              bytes[i] = text.size();
              content[i] = XXH3_64bits(text.data(), text.size());
              squeezed[i] = SqueezedHash(text);
              ok[i] = errors[i].ok();
              if (normalized && ok[i]) {
                auto details = engine_->ComputeDetails(text, false, true);
                if (details.ok()) normalized_bytes[i] = details->normalized_text.size();
              }
            }
          },
          64);
    }
    std::vector<uint64_t> hi(n), lo(n);
    for (size_t i = 0; i < n; ++i) {
      hi[i] = fps[i].hi;
      lo[i] = fps[i].lo;
    }
    py::dict out;
    out["ok"] = ToArray(ok).attr("astype")("bool");
    out["hi"] = ToArray(hi);
    out["lo"] = ToArray(lo);
    out["bytes"] = ToArray(bytes);
    out["content_hash"] = ToArray(content);
    out["squeezed_hash"] = ToArray(squeezed);
    out["normalized_bytes"] = ToArray(normalized_bytes);
    return out;
  }

 private:
  py::dict kwargs_;
  int threads_ = 0;
  std::unique_ptr<Fingerprinter> engine_;
};

// ---- keywords (jieba)
// -----------------------------------------------------------------------------

std::shared_ptr<const KeywordExtractor> GetExtractor(const std::string& idf,
                                                     const std::string& jieba_dir) {
  static std::mutex mutex;
  static std::map<std::pair<std::string, std::string>, std::shared_ptr<const KeywordExtractor>>
      cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto key = std::make_pair(idf, jieba_dir);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  Result<std::shared_ptr<const KeywordExtractor>> loaded = Status::Internal("unset");
  if (idf.empty() && jieba_dir.empty()) {
    loaded = KeywordExtractor::Default();
  } else {
    // As `neardup keywords --extract-tags --jieba-dir --idf` does.
    JiebaOptions jieba = JiebaOptionsForDirectory(jieba_dir);
    if (!idf.empty()) jieba.idf_path = idf;
    auto segmenter = JiebaSegmenter::Create(jieba);
    loaded = segmenter.ok() ? KeywordExtractor::Create(*segmenter, jieba)
                            : Result<std::shared_ptr<const KeywordExtractor>>(segmenter.status());
  }
  if (!loaded.ok()) return nullptr;  // caller reports (needs the GIL)
  cache.emplace(key, *loaded);
  return *loaded;
}

Status ExtractorStatus(const std::string& idf, const std::string& jieba_dir) {
  // Reloads only to produce the error message of a failed load (rare path).
  if (idf.empty() && jieba_dir.empty()) return KeywordExtractor::Default().status();
  JiebaOptions jieba = JiebaOptionsForDirectory(jieba_dir);
  if (!idf.empty()) jieba.idf_path = idf;
  auto segmenter = JiebaSegmenter::Create(jieba);
  if (!segmenter.ok()) return segmenter.status();
  return KeywordExtractor::Create(*segmenter, jieba).status();
}

py::list ExtractTags(py::handle text, size_t top_k, const std::string& idf,
                     const std::string& jieba_dir) {
  std::string_view view = TextView(text);
  std::shared_ptr<const KeywordExtractor> extractor;
  std::vector<Keyword> keywords;
  {
    py::gil_scoped_release release;
    extractor = GetExtractor(idf, jieba_dir);
    if (extractor) keywords = extractor->ExtractTags(view, top_k);
  }
  if (!extractor) Throw(ExtractorStatus(idf, jieba_dir));
  py::list out;
  for (const Keyword& keyword : keywords) out.append(py::make_tuple(keyword.word, keyword.weight));
  return out;
}

py::list Cut(py::handle text, bool hmm) {
  std::string_view view = TextView(text);
  std::vector<std::string_view> tokens;
  Result<std::shared_ptr<const JiebaSegmenter>> segmenter = Status::Internal("unset");
  {
    py::gil_scoped_release release;
    segmenter = JiebaSegmenter::Default();
    if (segmenter.ok()) (*segmenter)->Cut(view, &tokens, hmm);
  }
  Unwrap(std::move(segmenter));
  py::list out;
  for (std::string_view token : tokens) out.append(py::str(token.data(), token.size()));
  return out;
}

int Distance(py::handle a, py::handle b) {
  Fingerprint fa = FingerprintFromObject(a, 64, "a");
  Fingerprint fb = FingerprintFromObject(b, 64, "b");
  if (fa.bits != fb.bits) {
    // A 128-bit value whose high half is zero given as an int reads as 64 bits: widen it.
    if (fa.bits == 64) fa = Fingerprint::From128(0, fa.lo);
    if (fb.bits == 64) fb = Fingerprint::From128(0, fb.lo);
  }
  return HammingDistance(fa, fb);
}

// ---- shingles (verification) --------------------------------------------------------------------

class PyShingler {
 public:
  explicit PyShingler(bool traditional_to_simplified)
      : engine_(Unwrap(ShingleSimilarity::Create(traditional_to_simplified))) {}

  // The sorted distinct 32-bit shingle hashes dedup verifies with, one uint32 array per text.
  py::list Batch(py::handle texts, int threads) const {
    threads = Threads(threads);
    TextBatch batch(texts);
    std::vector<std::vector<uint32_t>> sets(batch.size());
    {
      py::gil_scoped_release release;
      ParallelFor(
          batch.size(), threads,
          [&](size_t begin, size_t end) {
            std::vector<uint64_t> wide;
            for (size_t i = begin; i < end; ++i) {
              if (!engine_->Shingles(batch.views[i], &wide).ok()) continue;
              ShingleSimilarity::Narrow(wide, &sets[i]);
            }
          },
          8);
    }
    py::list out;
    for (const auto& set : sets) out.append(ToArray(set));
    return out;
  }

 private:
  std::unique_ptr<ShingleSimilarity> engine_;
};

// A uint32 array-like (or the raw bytes of one, as the Dask pipeline ships shingle sets) copied
// from its buffer, never element by element through Python objects.
std::vector<uint32_t> U32(py::handle object) {
  if (PyBytes_Check(object.ptr())) {
    char* data = nullptr;
    Py_ssize_t size = 0;
    PyBytes_AsStringAndSize(object.ptr(), &data, &size);
    if (size % sizeof(uint32_t) != 0) throw py::value_error("bytes: not a whole number of uint32");
    std::vector<uint32_t> out(static_cast<size_t>(size) / sizeof(uint32_t));
    if (size > 0) std::memcpy(out.data(), data, static_cast<size_t>(size));
    return out;
  }
  auto array = py::array_t<uint32_t, py::array::c_style | py::array::forcecast>::ensure(object);
  if (!array) throw py::value_error("expected an array of uint32");
  if (array.ndim() != 1) throw py::value_error("expected a one-dimensional array of uint32");
  return std::vector<uint32_t>(array.data(), array.data() + array.shape(0));
}

double Jaccard(py::handle a, py::handle b) { return ShingleSimilarity::Jaccard32(U32(a), U32(b)); }

// ---- the pair rule (neardup/pair_rule.h) for the Dask pipeline and Python users
// --------------------

// Shingle document frequencies (the boilerplate weights' statistics), picklable and mergeable, so
// partitions can count apart and be summed.
class PyShingleFrequencies {
 public:
  explicit PyShingleFrequencies(size_t bytes) : sketch_(bytes) {}
  explicit PyShingleFrequencies(ShingleFrequencies sketch) : sketch_(std::move(sketch)) {}

  // Counts each set of `sets` (uint32 arrays or their bytes) as one document.
  void Add(const py::list& sets) {
    std::vector<std::vector<uint32_t>> copies;
    copies.reserve(sets.size());
    for (py::handle set : sets) copies.push_back(U32(set));
    py::gil_scoped_release release;
    for (const auto& set : copies) sketch_.AddDocument(set);
  }
  void Merge(const PyShingleFrequencies& other) { Check(sketch_.Merge(other.sketch_)); }
  py::array_t<uint32_t> Estimate(py::handle shingles) const {
    std::vector<uint32_t> values = U32(shingles);
    for (uint32_t& v : values) v = sketch_.Estimate(v);
    return ToArray(values);
  }
  py::bytes Serialize() const { return py::bytes(sketch_.Serialize()); }
  static PyShingleFrequencies Deserialize(const py::bytes& bytes) {
    return PyShingleFrequencies(Unwrap(ShingleFrequencies::Deserialize(std::string(bytes))));
  }
  const ShingleFrequencies& sketch() const { return sketch_; }

 private:
  ShingleFrequencies sketch_;
};

// One side's facts as arrays: hashes (n x 3 uint64: content hash, text bytes, whitespace-free
// hash) and a list of n narrowed sets.
struct FactArrays {
  std::vector<uint64_t> hashes;
  std::vector<std::vector<uint32_t>> sets;
  std::vector<std::vector<uint32_t>> units;  // empty: not given (the `edited` reason cannot apply)
};

FactArrays TakeFacts(py::handle hashes, const py::list& sets, py::handle units, const char* side) {
  auto array = py::array_t<uint64_t, py::array::c_style | py::array::forcecast>::ensure(hashes);
  if (!array || array.ndim() != 2 || array.shape(1) != 3) {
    throw py::type_error(std::string(side) +
                         "_hashes: expected an (n, 3) array of uint64 (content hash, text bytes, "
                         "whitespace-free hash)");
  }
  const size_t n = static_cast<size_t>(array.shape(0));
  if (sets.size() != n) {
    throw py::value_error(std::string(side) + "_sets: " + std::to_string(sets.size()) +
                          " sets for " + std::to_string(n) + " rows of hashes");
  }
  FactArrays facts;
  facts.hashes.assign(array.data(), array.data() + 3 * n);
  facts.sets.reserve(n);
  for (py::handle set : sets) facts.sets.push_back(U32(set));
  if (!units.is_none()) {
    if (!py::isinstance<py::list>(units)) {
      throw py::type_error(std::string(side) + "_units: expected a list of uint32 arrays or None");
    }
    const py::list list = py::reinterpret_borrow<py::list>(units);
    if (list.size() != n) {
      throw py::value_error(std::string(side) + "_units: " + std::to_string(list.size()) +
                            " unit sets for " + std::to_string(n) + " rows of hashes");
    }
    facts.units.reserve(n);
    for (py::handle set : list) facts.units.push_back(U32(set));
  }
  return facts;
}

// The pair rule of `options` (dedup's keywords) applied to pairs i = (left i, right i): a dict
// of arrays reason (uint8, DuplicateReason: 0 none, 1 exact_duplicate, 2 whitespace_duplicate,
// 3 near_duplicate, 4 contained, 5 edited), similarity, jaccard, containment and unit_jaccard
// (float64; NaN where not measured). The unit sets (optional lists, as _document_facts gives
// them) let the `edited` reason apply.
py::dict DecidePairsOfArrays(py::handle left_hashes, const py::list& left_sets,
                             py::handle right_hashes, const py::list& right_sets,
                             const py::dict& options, const PyShingleFrequencies* frequencies,
                             int threads, py::handle left_units, py::handle right_units) {
  FactArrays left = TakeFacts(left_hashes, left_sets, left_units, "left");
  FactArrays right = TakeFacts(right_hashes, right_sets, right_units, "right");
  if (left.sets.size() != right.sets.size()) {
    throw py::value_error("left and right differ in length");
  }
  const DedupOptions dedup = ParseDedupOptions(options);
  const PairRule rule = Unwrap(PairRule::Create(
      ResolvePairRule(dedup), dedup.boilerplate && frequencies ? &frequencies->sketch() : nullptr,
      dedup.boilerplate_options));
  const size_t n = left.sets.size();
  std::vector<PairDocument> a(n), b(n);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t* l = &left.hashes[3 * i];
    const uint64_t* r = &right.hashes[3 * i];
    a[i] = {l[0], l[1], l[2], left.sets[i], std::nullopt};
    b[i] = {r[0], r[1], r[2], right.sets[i], std::nullopt};
    if (!left.units.empty()) a[i].units = left.units[i];
    if (!right.units.empty()) b[i].units = right.units[i];
  }
  std::vector<PairDecision> decisions;
  {
    py::gil_scoped_release release;
    neardup::DecidePairs(rule, a, b, threads, &decisions);  // the verification stage
  }
  std::vector<uint8_t> reason(n);
  std::vector<double> similarity(n), jaccard(n), containment(n), unit_jaccard(n);
  for (size_t i = 0; i < n; ++i) {
    reason[i] = static_cast<uint8_t>(decisions[i].reason);
    similarity[i] = decisions[i].similarity;
    jaccard[i] = decisions[i].jaccard;
    containment[i] = decisions[i].containment;
    unit_jaccard[i] = decisions[i].unit_jaccard.value_or(std::numeric_limits<double>::quiet_NaN());
  }
  py::dict out;
  out["reason"] = ToArray(reason);
  out["similarity"] = ToArray(similarity);
  out["jaccard"] = ToArray(jaccard);
  out["containment"] = ToArray(containment);
  out["unit_jaccard"] = ToArray(unit_jaccard);
  return out;
}

// The facts of each text as dedup computes them: {"hashes": (n, 3) uint64, "sets": [uint32],
// "units": [uint32]} (the narrowed shingle and unit sets).
py::dict DocumentFactsOf(py::handle texts, bool traditional_to_simplified, int threads) {
  TextBatch batch(texts);
  auto shingler = Unwrap(ShingleSimilarity::Create(traditional_to_simplified));
  std::vector<DocumentFacts> facts(batch.size());
  std::vector<Status> errors(batch.size());
  {
    py::gil_scoped_release release;
    ParallelFor(
        batch.size(), threads,
        [&](size_t begin, size_t end) {
          for (size_t i = begin; i < end; ++i) {
            errors[i] = ComputeDocumentFacts(batch.views[i], *shingler, &facts[i]);
          }
        },
        8);
  }
  for (const Status& error : errors) Check(error);
  py::array_t<uint64_t> hashes({static_cast<py::ssize_t>(batch.size()), py::ssize_t{3}});
  uint64_t* h = hashes.mutable_data();
  py::list sets, units;
  for (size_t i = 0; i < facts.size(); ++i) {
    h[3 * i] = facts[i].content_hash;
    h[3 * i + 1] = facts[i].text_bytes;
    h[3 * i + 2] = facts[i].squeezed_hash;
    sets.append(ToArray(facts[i].shingles));
    units.append(ToArray(facts[i].units));
  }
  py::dict out;
  out["hashes"] = hashes;
  out["sets"] = sets;
  out["units"] = units;
  return out;
}

// ---- dedup over files (the library behind `neardup dedup`) ----------------------------------

py::dict ReportToDict(const DedupReport& report, const DedupOptions& options) {
  py::list ids;
  for (const DedupDocument& doc : report.documents) ids.append(doc.id);
  std::vector<uint64_t> hi, lo, bytes, file_index, line;
  for (const DedupDocument& doc : report.documents) {
    hi.push_back(doc.fingerprint.hi);
    lo.push_back(doc.fingerprint.lo);
    bytes.push_back(doc.text_bytes);
    file_index.push_back(doc.file_index);
    line.push_back(doc.line);
  }
  py::list clusters;
  for (const DedupCluster& cluster : report.clusters) {
    py::list members;
    for (const ClusterMember& m : cluster.removed) {
      members.append(py::make_tuple(m.document, m.distance_to_kept, m.via, m.distance_to_via,
                                    m.similarity_to_via, m.reason));
    }
    clusters.append(py::make_tuple(cluster.kept, members));
  }
  std::vector<uint8_t> removed(report.removed.begin(), report.removed.end());
  py::dict out;
  out["ids"] = ids;
  out["hi"] = ToArray(hi);
  out["lo"] = ToArray(lo);
  out["bits"] = options.fingerprint.bits;
  out["bytes"] = ToArray(bytes);
  out["file_index"] = ToArray(file_index);
  out["line"] = ToArray(line);
  out["removed"] = ToArray(removed).attr("astype")("bool");
  out["clusters"] = clusters;
  out["k"] = report.k.value_or(-1);
  out["lsh_candidate_pairs"] = report.lsh_candidate_pairs;
  out["simhash_candidate_pairs"] = report.simhash_candidate_pairs;
  out["summary"] = DedupSummaryJson(report, &options);
  out["input_files"] = report.input_files;
  return out;
}

// `memory`: inputs held in memory, name -> bytes (DocumentReaderOptions::memory_inputs); an input
// naming one of them is read from its bytes, with the rules of a file of that name.
py::dict DedupFiles(const std::vector<std::string>& inputs, const std::string& output_dir,
                    const py::dict& kwargs, const py::dict& memory, bool force,
                    const std::string& write_kept) {
  // The files this call reads are never written over (neardup/output_file.h), as in the CLI.
  InputScope input_scope;
  DedupOptions options = ParseDedupOptions(kwargs);
  if (!write_kept.empty()) {
    for (const std::string& input : inputs) {
      if (IsStreamInput(input) || memory.contains(input)) {
        throw py::value_error("write_kept: cannot re-read " + input +
                              " (standard input, a pipe or documents in memory)");
      }
    }
  }
  if (!output_dir.empty() || !write_kept.empty()) {
    // Refuse unwritable outputs before the run, not after it.
    OutputFileOptions check;
    check.force = force;
    std::vector<std::string> paths;
    if (!output_dir.empty()) {
      for (const char* name : {"clusters.jsonl", "keep.txt", "remove.txt", "summary.json"}) {
        paths.push_back(output_dir + "/" + name);
      }
    }
    if (!write_kept.empty()) paths.push_back(write_kept);
    Result<std::unique_ptr<DocumentReader>> expanded = Status::Internal("unset");
    if (memory.empty()) {
      expanded = DocumentReader::Open(inputs, DocumentReaderOptions{});
      if (!expanded.ok()) Throw(expanded.status());
      check.inputs = (*expanded)->files();
    }
    Check(CheckOutputPaths(paths, check));
  }
  for (auto item : memory) {
    char* data = nullptr;
    Py_ssize_t size = 0;
    if (!PyBytes_Check(item.second.ptr())) throw py::type_error("memory inputs: expected bytes");
    PyBytes_AsStringAndSize(item.second.ptr(), &data, &size);
    options.reader.memory_inputs[py::cast<std::string>(item.first)] =
        std::make_shared<const std::string>(data, static_cast<size_t>(size));
  }
  auto warnings = std::make_shared<std::vector<std::string>>();
  options.reader.on_warning = [warnings](const std::string& message) {
    if (warnings->size() < 1000) warnings->push_back(message);
  };
  Result<DedupReport> report = Status::Internal("unset");
  Status written;
  {
    py::gil_scoped_release release;
    report = RunDedup(inputs, options);
    if (report.ok() && (!output_dir.empty() || !write_kept.empty())) {
      DedupOutputOptions output;
      output.directory = output_dir;
      output.write_kept_path = write_kept;
      output.clusters_to_stdout = false;
      output.force = force;
      output.options = &options;
      output.inputs = &inputs;
      written = WriteDedupOutputs(*report, output);
    }
  }
  if (!report.ok()) Throw(report.status());
  Check(written);
  py::dict out = ReportToDict(*report, options);
  out["warnings"] = *warnings;
  return out;
}

// ---- the HTML report (neardup/report.h) ---------------------------------------------------------

// A non-negative int keyword of report().
size_t ReportSize(const py::handle& value, const char* name) {
  if (!PyLong_Check(value.ptr()) || PyBool_Check(value.ptr())) {
    throw py::type_error(std::string(name) + ": expected an int, got " +
                         std::string(py::str(py::type::of(value).attr("__name__"))));
  }
  const long long number = PyLong_AsLongLong(value.ptr());
  if (number == -1 && PyErr_Occurred()) throw py::error_already_set();
  if (number < 0) throw py::value_error(std::string(name) + " must not be negative");
  return static_cast<size_t>(number);
}

// Writes the report to `path`: of the folder `directory` when given, else of the in-memory
// summary.json and clusters.jsonl texts. `texts` (None, or a callable taking a list of
// (id, location) tuples and returning a list of str or None) supplies the texts instead of the
// run's recorded inputs. Returns the report's counts.
py::dict WriteReportFile(const std::string& path, const std::string& directory,
                         const std::string& summary_json, const std::string& clusters_jsonl,
                         const py::object& texts, const py::dict& keywords, bool force) {
  ReportOptions options;
  for (auto item : keywords) {
    const std::string key = py::cast<std::string>(item.first);
    if (key == "max_clusters") {
      options.max_clusters = ReportSize(item.second, "max_clusters");
    } else if (key == "max_members") {
      options.max_members_with_text = ReportSize(item.second, "max_members");
    } else if (key == "max_text_bytes") {
      options.max_text_bytes = ReportSize(item.second, "max_text_bytes");
    } else if (key == "max_total_text_bytes") {
      options.max_total_text_bytes = ReportSize(item.second, "max_total_text_bytes");
    } else if (key == "sample") {
      options.sample_size = ReportSize(item.second, "sample");
    } else if (key == "seed") {
      options.seed = ReportSize(item.second, "seed");
    } else if (key == "title") {
      if (!py::isinstance<py::str>(item.second)) throw py::type_error("title: expected a str");
      options.title = py::cast<std::string>(item.second);
    } else {
      throw py::type_error("report() got an unexpected keyword argument '" + key + "'");
    }
  }
  if (!texts.is_none()) {
    if (!PyCallable_Check(texts.ptr())) throw py::type_error("texts: expected a callable");
    options.texts = [texts](const std::vector<ReportDocumentRef>& wanted,
                            std::vector<std::optional<std::string>>* out) -> Status {
      py::gil_scoped_acquire acquire;
      try {
        py::list refs;
        for (const ReportDocumentRef& ref : wanted)
          refs.append(py::make_tuple(ref.id, ref.location));
        py::object got = texts(refs);
        py::sequence values = got.cast<py::sequence>();
        if (values.size() != wanted.size()) {
          return Status::InvalidArgument("texts: returned " + std::to_string(values.size()) +
                                         " values for " + std::to_string(wanted.size()) +
                                         " documents");
        }
        for (size_t i = 0; i < wanted.size(); ++i) {
          py::object value = values[i];
          if (value.is_none()) continue;
          if (!py::isinstance<py::str>(value)) {
            return Status::InvalidArgument("texts: expected str or None for " + wanted[i].id);
          }
          (*out)[i] = py::cast<std::string>(value);
        }
        return Status::Ok();
      } catch (py::error_already_set& error) {
        return Status::InvalidArgument(std::string("texts: ") + error.what());
      } catch (const py::cast_error& error) {
        return Status::InvalidArgument(std::string("texts: ") + error.what());
      }
    };
  }
  Result<ReportStats> stats = Status::Internal("unset");
  {
    py::gil_scoped_release release;
    if (!directory.empty()) {
      stats = WriteReport(directory, path, options, force);
    } else {
      ReportSources sources;
      sources.summary_json = summary_json;
      sources.clusters_jsonl = clusters_jsonl;
      ReportStats counts;
      auto page = RenderReport(sources, options, &counts);
      if (!page.ok()) {
        stats = page.status();
      } else {
        OutputFileOptions file_options;
        file_options.force = force;
        Status written = WriteOutputFile(path, *page, file_options);
        stats = written.ok() ? Result<ReportStats>(counts) : Result<ReportStats>(written);
      }
    }
  }
  ReportStats counts = Unwrap(std::move(stats));
  py::dict out;
  out["path"] = path;
  out["clusters"] = counts.clusters;
  out["clusters_shown"] = counts.clusters_embedded;
  out["removed"] = counts.removed;
  out["sample"] = counts.sample;
  out["texts_wanted"] = counts.texts_wanted;
  out["texts_found"] = counts.texts_found;
  out["texts_note"] = counts.texts_note;
  out["bytes"] = counts.bytes;
  return out;
}

// The options a dedup run resolves (for the Dask pipeline): bits, the SimHash k, the LSH
// parameters, the verification threshold, which candidate stages run, keep policy, t2s, fields.
py::dict ResolveDedupOptions(const py::dict& kwargs) {
  DedupOptions options = ParseDedupOptions(kwargs);
  const MinHashLshOptions lsh = Unwrap(ResolveDedupLsh(options));
  py::dict out;
  out["bits"] = options.fingerprint.bits;
  out["k"] = options.k;
  out["use_lsh"] = options.candidates != DedupOptions::Candidates::kSimHash;
  out["use_simhash"] = options.candidates != DedupOptions::Candidates::kLsh;
  out["threshold"] = options.lsh.threshold;
  out["bands"] = lsh.parameters->bands;
  out["rows"] = lsh.parameters->rows;
  out["bucket_window"] = options.lsh.bucket_window;
  out["seed"] = options.lsh.seed;
  out["verify"] = ResolveVerifyThreshold(options);
  out["edited"] = ResolvePairRule(options).edited_threshold;  // Dask keeps unit sets when > 0
  out["keep_field"] = options.keep_field;
  out["t2s"] = options.fingerprint.normalize.traditional_to_simplified;
  out["id_field"] = options.reader.id_field;
  out["text_field"] = options.reader.text_field;
  out["strict"] = options.reader.strict;
  out["threads"] = options.threads;
  return out;
}

// ---- the MinHash LSH candidate stage (neardup/minhash_lsh.h) ----------------------------------

class PyMinHashLsh {
 public:
  PyMinHashLsh(double threshold, int bands, int rows, uint32_t bucket_window, uint64_t seed,
               bool traditional_to_simplified)
      : t2s_(traditional_to_simplified) {
    MinHashLshOptions options;
    options.threshold = threshold;
    if (bands != 0 || rows != 0) options.parameters = LshParameters{bands, rows};
    options.bucket_window = bucket_window;
    options.seed = seed;
    lsh_ = std::make_unique<MinHashLsh>(Unwrap(MinHashLsh::Create(options)));
    shingler_ = Unwrap(ShingleSimilarity::Create(traditional_to_simplified));
  }

  int bands() const { return lsh_->parameters().bands; }
  int rows() const { return lsh_->parameters().rows; }
  const MinHashLshOptions& options() const { return lsh_->options(); }
  bool t2s() const { return t2s_; }

  // Band keys of each text, shape (n, bands) uint32, and whether the text has any (a text without
  // shingles has none and is in no bucket), on all cores.
  py::tuple BandKeys(py::handle texts, int threads) const {
    threads = Threads(threads);
    TextBatch batch(texts);
    const size_t n = batch.size();
    const size_t b = static_cast<size_t>(bands());
    py::array_t<uint32_t> keys({static_cast<py::ssize_t>(n), static_cast<py::ssize_t>(b)});
    std::vector<uint8_t> has(n, 0);
    uint32_t* data = keys.mutable_data();
    {
      py::gil_scoped_release release;
      std::fill(data, data + n * b, 0u);
      ParallelFor(
          n, threads,
          [&](size_t begin, size_t end) {
            std::vector<uint64_t> shingles;
            for (size_t i = begin; i < end; ++i) {
              if (!shingler_->Shingles(batch.views[i], &shingles).ok()) continue;
              has[i] = lsh_->BandKeysOf(shingles, std::span<uint32_t>(data + i * b, b));
            }
          },
          16);
    }
    return py::make_tuple(keys, ToArray(has).attr("astype")("bool"));
  }

  py::array_t<uint32_t> Signature(py::handle text) const {
    std::string_view view = TextView(text);
    std::vector<uint64_t> shingles;
    Check(shingler_->Shingles(view, &shingles));
    std::vector<uint32_t> signature;
    lsh_->Signature(shingles, &signature);
    return ToArray(signature);
  }

  // Candidate pairs (a < b) of documents 0..n-1 with band keys `keys` (n, bands) and `has` (n),
  // exactly as `neardup dedup` forms them.
  py::tuple CandidatePairs(py::array_t<uint32_t, py::array::c_style | py::array::forcecast> keys,
                           py::array_t<bool, py::array::c_style | py::array::forcecast> has,
                           int threads) const {
    threads = Threads(threads);
    if (keys.ndim() != 2 || keys.shape(1) != bands() || has.ndim() != 1 ||
        has.shape(0) != keys.shape(0)) {
      throw py::value_error("keys: expected shape (n, bands) and has: shape (n,)");
    }
    const size_t n = keys.shape(0);
    const size_t b = static_cast<size_t>(bands());
    std::vector<LshPair> pairs;
    LshJoinStats stats;
    {
      py::gil_scoped_release release;
      BandKeyTable table(bands());
      table.Reserve(n);
      const uint32_t* data = keys.data();
      const bool* flags = has.data();
      for (size_t i = 0; i < n; ++i) {
        table.Append(flags[i] ? std::span<const uint32_t>(data + i * b, b)
                              : std::span<const uint32_t>());
      }
      pairs = LshCandidatePairs(table, lsh_->options().bucket_window, threads, &stats);
    }
    std::vector<uint64_t> a(pairs.size()), bb(pairs.size());
    for (size_t i = 0; i < pairs.size(); ++i) {
      a[i] = pairs[i].a;
      bb[i] = pairs[i].b;
    }
    return py::make_tuple(ToArray(a), ToArray(bb));
  }

 private:
  bool t2s_ = true;
  std::unique_ptr<MinHashLsh> lsh_;
  std::unique_ptr<ShingleSimilarity> shingler_;
};

// ---- Hamming index ----------------------------------------------------------------------------

class PyIndex {
 public:
  PyIndex(int bits, int indexed_k, double expected_size, int threads) {
    threads = Threads(threads);
    PermutedIndexOptions options;
    options.bits = bits;
    options.indexed_k = indexed_k;
    options.expected_size = expected_size;
    options.threads = threads;
    index_ = Unwrap(PermutedIndex::Create(options));
  }

  void Add(py::handle ids_object, py::handle fps_object) {
    const bool scalar = !py::isinstance<py::array>(fps_object) &&
                        !py::isinstance<py::list>(fps_object) &&
                        !py::isinstance<py::tuple>(fps_object);
    if (scalar) {
      Fingerprint fp = FingerprintFromObject(fps_object, index_->bits(), "fingerprint");
      uint64_t id = UInt64FromObject(ids_object, "ids");
      Check(index_->Add(id, fp));
      return;
    }
    std::vector<Fingerprint> fps = FingerprintsFromArray(fps_object, index_->bits());
    std::vector<uint64_t> ids = IdsFromObject(ids_object, fps.size());
    Status status;
    {
      py::gil_scoped_release release;
      status = index_->AddBatch(ids, fps);
    }
    Check(status);
  }

  size_t Remove(uint64_t id, py::handle fp) {
    return index_->Remove(id, FingerprintFromObject(fp, index_->bits(), "fingerprint"));
  }

  py::tuple Search(py::handle fp_object, int k) const {
    Fingerprint fp = FingerprintFromObject(fp_object, index_->bits(), "fingerprint");
    if (fp.bits != index_->bits()) fp = Fingerprint::From128(fp.hi, fp.lo);
    Result<std::vector<Neighbor>> hits = Status::Internal("unset");
    {
      py::gil_scoped_release release;
      hits = index_->Search(fp, k);
    }
    auto list = Unwrap(std::move(hits));
    std::vector<uint64_t> ids;
    std::vector<int32_t> distances;
    for (const Neighbor& hit : list) {
      ids.push_back(hit.id);
      distances.push_back(hit.distance);
    }
    return py::make_tuple(ToArray(ids), ToArray(distances));
  }

  py::tuple SearchBatch(py::handle fps_object, int k) const {
    std::vector<Fingerprint> queries = FingerprintsFromArray(fps_object, index_->bits());
    Result<std::vector<std::vector<Neighbor>>> hits = Status::Internal("unset");
    {
      py::gil_scoped_release release;
      hits = index_->SearchBatch(queries, k);
    }
    auto lists = Unwrap(std::move(hits));
    std::vector<uint64_t> query, ids;
    std::vector<int32_t> distances;
    for (size_t q = 0; q < lists.size(); ++q) {
      for (const Neighbor& hit : lists[q]) {
        query.push_back(q);
        ids.push_back(hit.id);
        distances.push_back(hit.distance);
      }
    }
    return py::make_tuple(ToArray(query), ToArray(ids), ToArray(distances));
  }

  py::tuple SelfJoin(int k) const {
    Result<std::vector<NeighborPair>> pairs = Status::Internal("unset");
    {
      py::gil_scoped_release release;
      pairs = index_->SelfJoin(k);
    }
    auto list = Unwrap(std::move(pairs));
    std::vector<uint64_t> a, b;
    std::vector<int32_t> d;
    a.reserve(list.size());
    b.reserve(list.size());
    d.reserve(list.size());
    for (const NeighborPair& pair : list) {
      a.push_back(pair.a);
      b.push_back(pair.b);
      d.push_back(pair.distance);
    }
    return py::make_tuple(ToArray(a), ToArray(b), ToArray(d));
  }

  void Compact() {
    py::gil_scoped_release release;
    index_->Compact();
  }

  py::dict Stats() const {
    PermutedIndexStats s = index_->detailed_stats();
    py::dict out;
    out["queries"] = s.search.queries;
    out["probes"] = s.search.probes;
    out["candidates"] = s.search.candidates;
    out["results"] = s.search.results;
    out["segments"] = s.segments;
    out["delta_size"] = s.delta_size;
    out["tombstones"] = s.tombstones;
    out["memory_bytes"] = s.memory_bytes;
    return out;
  }

  PermutedIndex& index() { return *index_; }
  const PermutedIndex& index() const { return *index_; }

 private:
  std::unique_ptr<PermutedIndex> index_;
};

// ---- persistent store --------------------------------------------------------------------------

py::dict StoredToDict(const StoredDocument& doc, bool with_distance) {
  py::dict out;
  out["id"] = doc.id;
  out["fingerprint"] = FingerprintToInt(doc.fingerprint);
  // Metadata is JSON text (as `neardup index add` stores it) or what the caller gave: str when it
  // is UTF-8, bytes otherwise, None when there is none.
  if (doc.metadata.empty()) {
    out["metadata"] = py::none();
  } else if (utf8::FindInvalid(doc.metadata) == std::string_view::npos) {
    out["metadata"] = py::str(doc.metadata);
  } else {
    out["metadata"] = py::bytes(doc.metadata);
  }
  if (with_distance) out["distance"] = doc.distance;
  return out;
}

std::string MetadataBytes(py::handle metadata) {
  if (metadata.is_none()) return {};
  return std::string(TextView(metadata, "metadata"));
}

// A str argument that must be one of `choices` (not an option of the registry): ValueError
// naming it otherwise.
void CheckChoice(const char* name, const std::string& value,
                 std::initializer_list<const char*> choices) {
  std::string list;
  for (const char* choice : choices) {
    if (value == choice) return;
    if (!list.empty()) list += ", ";
    list += choice;
  }
  throw py::value_error(std::string(name) + ": expected one of " + list + ", got \"" + value +
                        "\"");
}

// A store error as Python raises it: the command line's `--rule simhash` hint as the keyword.
void CheckStore(const Status& status) {
  if (status.ok()) return;
  std::string message = status.message();
  const std::string flag = "`--rule simhash`";
  if (size_t at = message.find(flag); at != std::string::npos) {
    message.replace(at, flag.size(), "`rule=\"simhash\"`");
  }
  Check(Status(status.code(), message));
}

class PyStore {
 public:
  // Like `neardup index`: a new store records the fingerprint options the keywords choose
  // (FingerprintOptionsToString in its MANIFEST); an existing store keeps the ones it recorded,
  // and a keyword asking for another value is refused (ValueError naming it).
  PyStore(const std::string& path, bool create_if_missing, bool error_if_exists,
          const std::string& sync, bool verify_checksums, const py::kwargs& keywords) {
    // Fingerprint keywords (recorded by a new store, checked against an existing one's) and the
    // store's own (bits, indexed_k, memory_budget, expected_size, memtable_limit, wal_flush_bytes,
    // and the rule of a new store: rule, with dedup's threshold, bands, rows, bucket_window).
    py::dict fingerprint_keywords, store_keywords;
    for (auto [key, value] : keywords) {
      const std::string name = py::cast<std::string>(key);
      const OptionSpec* spec = FindFlag(name);
      if (spec == nullptr || name == "replace_invalid_utf8") UnknownOption(name);
      if ((spec->scope & kStoreScope) || name == "threshold" || name == "bands" || name == "rows" ||
          name == "bucket_window" || name == "containment" || name == "containment_min_shingles" ||
          name == "containment_min_ratio" || name == "edited" || name == "edited_min_jaccard") {
        store_keywords[key] = value;
      } else if (spec->scope & kFingerprintScope) {
        fingerprint_keywords[key] = value;
        if (name == "bits") store_keywords[key] = value;
      } else {
        UnknownOption(name);
      }
    }
    const OptionValues given = KeywordValues(fingerprint_keywords, kFingerprintScope);
    // sync and verify_checksums are the registry's store options too (checked and applied there,
    // as `serve --sync` and `--no-verify`; group_commit_ms, a keyword, needs sync="group").
    store_keywords["sync"] = sync;
    store_keywords["verify_checksums"] = verify_checksums;
    const OptionValues store_values =
        KeywordValues(store_keywords, kFingerprintScope | kStoreScope | kDedupScope);
    StoreOptions options;
    Check(store_values.ApplyTo(&options));
    options.create_if_missing = create_if_missing;
    options.error_if_exists = error_if_exists;
    Result<std::unique_ptr<DocumentStore>> opened = Status::Internal("unset");
    {
      py::gil_scoped_release release;
      opened = OpenStoreWithFingerprintOptions(path, options, given, &fingerprint_options_);
    }
    if (!opened.ok()) Throw(opened.status());
    store_ = std::move(*opened);
    // A dedup-rule store sketches texts with its LSH options (a SimHash store has none).
    if (const std::optional<MinHashLshOptions> lsh = store_->LshOptions()) {
      const bool units = store_->SketchesNeedUnits();
      auto sketcher =
          DocumentSketcher::Create(fingerprint_options_, *lsh, units,
                                   units ? store_->SketchUnitBits() : ShingleSimilarity::kUnitBits);
      if (!sketcher.ok()) {
        (void)store_->Close();
        store_.reset();
        Throw(sketcher.status());
      }
      sketcher_ = std::move(*sketcher);
    }
  }

  // The store's rule: "dedup" or "simhash".
  std::string rule() { return StoreRuleName(store().Stats().rule); }

  // check(text, id=None, add="if_new", metadata=None, k=3): the store's rule applied to one text;
  // check_batch(texts, ids=None, ...): to many, in order, each also against the earlier added
  // ones of the batch, atomically.
  py::dict CheckText(py::handle text, py::handle id, const std::string& add, py::handle metadata,
                     int k) {
    py::list texts, ids, metadatas;
    texts.append(text);
    ids.append(id);
    metadatas.append(metadata);
    return CheckBatch(texts, id.is_none() ? py::object(py::none()) : py::object(ids), add,
                      metadata.is_none() ? py::object(py::none()) : py::object(metadatas), k)[0];
  }

  py::list CheckBatch(py::handle texts_object, py::handle ids_object, const std::string& add,
                      py::handle metadata_object, int k) {
    CheckChoice("add", add, {"if_new", "always", "never"});
    if (py::isinstance<py::str>(texts_object) || py::isinstance<py::bytes>(texts_object)) {
      throw py::type_error("texts: must be a sequence of str, not a single string");
    }
    std::vector<std::string_view> texts;
    for (py::handle item : py::iter(texts_object)) {
      texts.push_back(TextView(item, "texts[" + std::to_string(texts.size()) + "]"));
    }
    std::vector<std::string> ids(texts.size()), metas(texts.size());
    if (!ids_object.is_none()) {
      if (py::isinstance<py::str>(ids_object))
        throw py::type_error("ids: must be a sequence of str");
      size_t i = 0;
      for (py::handle item : py::iter(ids_object)) {
        if (i >= ids.size()) throw py::value_error("ids and texts differ in length");
        if (!py::isinstance<py::str>(item)) {
          throw py::type_error("ids[" + std::to_string(i) + "]: must be str, not " +
                               std::string(py::str(py::type::of(item).attr("__name__"))));
        }
        ids[i++] = py::cast<std::string>(item);
      }
      if (i != ids.size()) throw py::value_error("ids and texts differ in length");
    } else if (add != "never") {
      throw py::value_error("ids: needed to add documents (add=\"never\" checks without them)");
    }
    if (!metadata_object.is_none()) {
      size_t i = 0;
      for (py::handle item : py::iter(metadata_object)) {
        if (i >= metas.size()) throw py::value_error("metadata and texts differ in length");
        metas[i++] = MetadataBytes(item);
      }
      if (i != metas.size()) throw py::value_error("metadata and texts differ in length");
    }
    DocumentStore& s = store();
    std::vector<DocumentInput> docs(texts.size());
    std::vector<DocumentSketch> sketches(texts.size());
    Result<std::vector<CheckResult>> results = Status::Internal("unset");
    {
      py::gil_scoped_release release;
      Status status;
      for (size_t i = 0; i < texts.size() && status.ok(); ++i) {
        docs[i].id = ids[i];
        docs[i].metadata = metas[i];
        if (sketcher_) {
          status = sketcher_->Sketch(texts[i], &docs[i].fingerprint, &sketches[i]);
          docs[i].sketch = &sketches[i];
        } else {
          if (!fingerprinter_) {
            auto created = Fingerprinter::Create(fingerprint_options_);
            status = created.status();
            if (created.ok()) fingerprinter_ = std::move(*created);
          }
          if (status.ok()) {
            Result<Fingerprint> fp = fingerprinter_->Compute(texts[i]);
            status = fp.status();
            if (fp.ok()) docs[i].fingerprint = *fp;
          }
        }
        if (!status.ok() && texts.size() > 1) {
          status = status.WithContext("texts[" + std::to_string(i) + "]");
        }
      }
      if (status.ok()) {
        CheckOptions options;
        options.k = k;
        options.add = add == "never"    ? AddMode::kNever
                      : add == "always" ? AddMode::kAlways
                                        : AddMode::kIfNew;
        results = s.CheckBatch(docs, options);
      } else {
        results = status;
      }
    }
    if (!results.ok()) CheckStore(results.status());
    py::list out;
    for (CheckResult& result : *results) {
      py::list duplicates;
      for (const StoredDocument& dup : result.duplicates) {
        py::dict d = StoredToDict(dup, true);
        d["similarity"] = dup.similarity ? py::object(py::float_(*dup.similarity)) : py::none();
        d["reason"] = DuplicateReasonName(dup.reason);
        duplicates.append(d);
      }
      py::dict entry;
      entry["duplicate"] = !result.duplicates.empty();
      entry["added"] = result.added;
      entry["replaced"] = result.replaced;
      entry["duplicates"] = duplicates;
      out.append(entry);
    }
    return out;
  }

  // The recorded fingerprint options (FingerprintOptionsToString), "" for a store created
  // without them.
  std::string fingerprint_options() { return store().Stats().fingerprint_options; }

  DocumentStore& store() {
    if (!store_) throw py::value_error("the store is closed");
    return *store_;
  }
  int bits() { return static_cast<int>(store().Stats().bits); }

  bool Add(const std::string& id, py::handle fp, py::handle metadata) {
    DocumentInput doc{id, FingerprintFromObject(fp, bits(), "fingerprint"), std::string_view()};
    std::string meta = MetadataBytes(metadata);
    doc.metadata = meta;
    bool replaced = false;
    Status status;
    {
      py::gil_scoped_release release;
      status = store().Add(doc, &replaced);
    }
    CheckStore(status);
    return replaced;
  }

  void AddBatch(const std::vector<std::string>& ids, py::handle fps_object, py::handle metadata) {
    std::vector<Fingerprint> fps = FingerprintsFromArray(fps_object, bits());
    if (fps.size() != ids.size()) throw py::value_error("ids and fingerprints differ in length");
    std::vector<std::string> metas(ids.size());
    if (!metadata.is_none()) {
      size_t i = 0;
      for (py::handle item : py::iter(metadata)) {
        if (i >= metas.size()) break;
        metas[i++] = MetadataBytes(item);
      }
      if (i != metas.size()) throw py::value_error("metadata and ids differ in length");
    }
    std::vector<DocumentInput> docs(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) docs[i] = {ids[i], fps[i], metas[i]};
    Status status;
    {
      py::gil_scoped_release release;
      status = store().AddBatch(docs);
    }
    CheckStore(status);
  }

  py::list Search(py::handle fp, int k, size_t limit) {
    Fingerprint query = FingerprintFromObject(fp, bits(), "fingerprint");
    Result<std::vector<StoredDocument>> hits = Status::Internal("unset");
    {
      py::gil_scoped_release release;
      hits = store().Search(query, k, limit);
    }
    py::list out;
    for (const StoredDocument& doc : Unwrap(std::move(hits))) out.append(StoredToDict(doc, true));
    return out;
  }

  py::dict CheckAndAdd(const std::string& id, py::handle fp, int k, bool always_add,
                       py::handle metadata) {
    DocumentInput doc{id, FingerprintFromObject(fp, bits(), "fingerprint"), std::string_view()};
    std::string meta = MetadataBytes(metadata);
    doc.metadata = meta;
    Result<CheckResult> result = Status::Internal("unset");
    {
      py::gil_scoped_release release;
      result = store().CheckAndAdd(doc, k, always_add);
    }
    if (!result.ok()) CheckStore(result.status());
    CheckResult checked = std::move(*result);
    py::list duplicates;
    for (const StoredDocument& dup : checked.duplicates) duplicates.append(StoredToDict(dup, true));
    py::dict out;
    out["duplicates"] = duplicates;
    out["added"] = checked.added;
    out["replaced"] = checked.replaced;
    return out;
  }

  py::dict Get(const std::string& id) {
    auto got = store().Get(id);
    if (!got.ok() && got.status().code() == StatusCode::kNotFound) {
      throw py::key_error(got.status().message());
    }
    return StoredToDict(Unwrap(std::move(got)), false);
  }

  void Remove(const std::string& id) {
    Status status = store().Remove(id);
    if (status.code() == StatusCode::kNotFound) throw py::key_error(status.message());
    Check(status);
  }

  py::dict Stats() {
    StoreStats s = store().Stats();
    py::dict out;
    out["documents"] = s.documents;
    out["segments"] = s.segments;
    out["segment_entries"] = s.segment_entries;
    out["memtable_entries"] = s.memtable_entries;
    out["wal_bytes"] = s.wal_bytes;
    out["disk_bytes"] = s.disk_bytes;
    out["compactions"] = s.compactions;
    out["flushes"] = s.flushes;
    out["searches"] = s.searches;
    out["writes"] = s.writes;
    out["bits"] = s.bits;
    out["indexed_k"] = s.indexed_k;
    out["max_k"] = s.indexed_k;  // deprecated: the old name of indexed_k, for one release
    out["index_design"] = s.index_design;
    out["fingerprint_options"] = s.fingerprint_options;
    out["rule"] = StoreRuleName(s.rule);
    if (s.rule == StoreRule::kDedup) {  // the recorded rule, as /v1/stats says it
      out["threshold"] = s.lsh.threshold;
      out["bands"] = s.lsh.parameters.value_or(LshParameters{}).bands;
      out["rows"] = s.lsh.parameters.value_or(LshParameters{}).rows;
      out["bucket_window"] = s.lsh.bucket_window;
      out["containment"] = s.pair_rule.containment_threshold;
      out["containment_min_shingles"] = s.pair_rule.containment_min_shingles;
      out["containment_min_ratio"] = s.pair_rule.containment_min_ratio;
      out["edited"] = s.pair_rule.edited_threshold;
      out["edited_min_jaccard"] = s.pair_rule.edited_min_jaccard;
    }
    return out;
  }

  void Flush() {
    Status status;
    {
      py::gil_scoped_release release;
      status = store().Flush();
    }
    Check(status);
  }
  void Compact() {
    Status status;
    {
      py::gil_scoped_release release;
      status = store().Compact();
    }
    Check(status);
  }
  void Close() {
    if (!store_) return;
    Status status;
    {
      py::gil_scoped_release release;
      status = store_->Close();
    }
    store_.reset();
    Check(status);
  }
  bool closed() const { return store_ == nullptr; }

 private:
  std::unique_ptr<DocumentStore> store_;
  FingerprintOptions fingerprint_options_;  // the store's, as OpenStoreWithFingerprintOptions chose
  std::unique_ptr<DocumentSketcher> sketcher_;    // a dedup-rule store's text pipeline
  std::unique_ptr<Fingerprinter> fingerprinter_;  // a simhash store's (made when first needed)
};

// ---- docstrings (what help() shows; the .pyi stubs carry the types)
// ------------------------------

namespace doc {

constexpr const char* kFingerprinter = R"(Text in, SimHash fingerprint out.

Fingerprinter(**options): the options are the flags of `neardup fingerprint` with '-' turned
into '_' and the same defaults: profile ("neardup" | "yanyiwu"), tokenizer ("auto" | "jieba" |
"icu" | "char"), shingle (2), ngram (4), weighting ("tf" | "tfidf" | "uniform"), top_k (0 = all),
bits (64 | 128), hash ("xxh3" | "jenkins"), no_nfkc, no_casefold, no_t2s, no_whitespace_folding,
keep_markup (= no_strip_markup), replace_invalid_utf8, idf, jieba_dir; threads (0 = all cores)
for the batch form. A wrong type is a TypeError, a bad value a ValueError, naming the keyword.

Immutable and safe to share between threads; picklable (rebuilt from its options).

    >>> fp = neardup.Fingerprinter(bits=64)
    >>> fp.distance("the quick brown fox", "the quick brown fox!")
    0)";
constexpr const char* kFingerprint =
    "fingerprint(text) -> int\n\nThe fingerprint of one text (str or UTF-8 bytes) as an int of 64 "
    "or 128 bits. ValueError for invalid UTF-8 bytes or a text with nothing to fingerprint.";
constexpr const char* kFingerprintBatch = R"(fingerprint_batch(texts, errors="raise")

Fingerprints of many texts on all cores with the GIL released: a uint64 array of shape (n,) for
64 bits, (n, 2) [hi, lo] for 128.
errors="raise": ValueError / TypeError naming the first text that cannot be fingerprinted.
errors="mask": returns (fingerprints, ok), ok a bool array; an item that cannot be fingerprinted
(None, NaN, a number, an empty text) gets ok False and fingerprint 0.)";
constexpr const char* kFeatures =
    "features(text) -> list[(str, float)]\n\nThe weighted features the fingerprint is made of, "
    "heaviest first.";
constexpr const char* kKeywords =
    "keywords(text, top_k=20) -> list[(str, float)]\n\nThe top_k heaviest features (what "
    "`neardup keywords` prints).";
constexpr const char* kTextDistance =
    "distance(a, b) -> int\n\nHamming distance of the fingerprints of two texts.";
constexpr const char* kExtractTags =
    "extract_tags(text, top_k=20, idf='', jieba_dir='') -> list[(str, float)]\n\n"
    "jieba.analyse.extract_tags(text, topK=top_k, withWeight=True), exactly.";
constexpr const char* kCut =
    "cut(text, hmm=True) -> list[str]\n\njieba.lcut(text, HMM=hmm), exactly.";
constexpr const char* kDistance =
    "distance(a, b) -> int\n\nHamming distance of two fingerprints (ints, or hex / binary / "
    "\"d:decimal\" strings).";
constexpr const char* kToHex =
    "to_hex(fingerprint, bits=64) -> str\n\n16 or 32 lowercase hex digits, as the CLI prints "
    "fingerprints.";
constexpr const char* kParseFingerprint =
    "parse_fingerprint(text) -> int\n\nParses any form the CLI prints (hex, binary, "
    "\"d:decimal\").";
constexpr const char* kJaccard =
    "jaccard(a, b) -> float\n\nJaccard similarity of two sorted distinct uint32 shingle sets (see "
    "neardup.shingles).";
constexpr const char* kLshProbability =
    "lsh_probability(jaccard, bands, rows) -> float\n\nProbability that a pair of Jaccard "
    "similarity `jaccard` becomes a candidate: 1 - (1 - J^rows)^bands.";
constexpr const char* kChooseLsh =
    "choose_lsh_parameters(threshold, recall_at_threshold=..., max_signature=...) -> (bands, "
    "rows)\n\nThe (bands, rows) `neardup dedup --threshold` uses.";
constexpr const char* kMinHashLsh = R"(The MinHash LSH candidate stage of `neardup dedup`.

MinHashLsh(threshold=0.5, bands=0, rows=0, bucket_window=64, seed=..., t2s=True): bands and rows
0 are chosen from the threshold (see choose_lsh_parameters). Picklable.)";
constexpr const char* kBandKeys =
    "band_keys(texts, threads=0) -> (keys, has_keys)\n\nBand keys of shape (n, bands) and a bool "
    "array of which texts have any, on all cores.";
constexpr const char* kCandidatePairs =
    "candidate_pairs(keys, has, threads=0) -> (a, b)\n\nCandidate pairs (a < b) of documents "
    "0..n-1, as `neardup dedup` forms them.";
constexpr const char* kHammingIndex =
    R"(Exact in-memory search of fingerprints within a Hamming distance.

HammingIndex(bits=64, indexed_k=3, expected_size=1e6, threads=0): permuted sorted tables answer
every query with k <= indexed_k exactly; threads (0 = all cores) for the batch calls.
Ids are non-negative integers below 2**64; fingerprints ints, hex strings or uint64 arrays.)";
constexpr const char* kIndexAdd = R"(add(ids, fingerprints)

Adds fingerprints: either one id (int) and one fingerprint, or a sequence / array of ids (None =
0..n-1) and a uint64 array (or sequence of ints) of fingerprints, shape (n,) for 64 bits and
(n, 2) [hi, lo] for 128. TypeError for ids or fingerprints that are not integers (str, float,
bool), ValueError for negative values or values wider than 64 bits.)";
constexpr const char* kIndexRemove =
    "remove(id, fingerprint) -> int\n\nRemoves the entry (id, fingerprint); returns how many were "
    "removed.";
constexpr const char* kIndexSearch =
    "search(fingerprint, k) -> (ids, distances)\n\nEvery stored fingerprint within k, sorted by "
    "(distance, id).";
constexpr const char* kIndexSearchBatch =
    "search_batch(fingerprints, k) -> (query, ids, distances)\n\nEvery hit of every query row, on "
    "all cores.";
constexpr const char* kIndexSelfJoin =
    "self_join(k) -> (a, b, distances)\n\nEvery stored pair within k, a < b.";
constexpr const char* kStore =
    R"(A persistent, crash-safe store of documents (id, fingerprint, metadata).

Store(path, create_if_missing=True, error_if_exists=False, bits=None, indexed_k=3, sync="every",
group_commit_ms=2 (sync="group" only), memtable_limit=65536, verify_checksums=True, rule="dedup",
threshold=..., bands=..., rows=..., bucket_window=..., **fingerprint_options): opens or creates the store directory `path` (the one
`neardup serve` and `neardup index` use). rule="dedup" (the default for a new store) answers with
`neardup dedup`'s rule (exact copy, whitespace-only copy, MinHash LSH candidate whose verified
shingle Jaccard reaches the threshold) and takes texts (check / check_batch); rule="simhash"
stores bare fingerprints. Documents come back as dicts {"id": str, "fingerprint": int,
"metadata": str | None (+ "distance", "similarity", "reason")}; metadata is the JSON text
`neardup index add` stored (bytes only if it was given as non-UTF-8 bytes).)";
constexpr const char* kStoreAdd =
    "add(id, fingerprint, metadata=None) -> bool\n\nAdds or replaces one document; True if it "
    "replaced one with the same id.";
constexpr const char* kStoreAddBatch =
    "add_batch(ids, fingerprints, metadata=None)\n\nAdds many documents as one atomic write.";
constexpr const char* kStoreSearch =
    "search(fingerprint, k, limit=0) -> list[dict]\n\nStored documents within k, by (distance, "
    "id); at most `limit` (0 = all).";
constexpr const char* kStoreCheckAndAdd =
    "check_and_add(id, fingerprint, k, always_add=False, metadata=None) -> dict\n\nAtomically: "
    "the stored near-duplicates within k, then the add (always, or only when there is none): "
    "{\"duplicates\": [...], \"added\": bool, \"replaced\": bool}.";
constexpr const char* kStoreCheck =
    "check(text, id=None, add=\"if_new\", metadata=None, k=3) -> dict\n\nThe store's rule applied "
    "to one text, atomically with the add (\"if_new\", \"always\" or \"never\"): {\"duplicate\", "
    "\"added\", \"replaced\", \"duplicates\": [{..., \"similarity\", \"reason\"}]}.";
constexpr const char* kStoreCheckBatch =
    "check_batch(texts, ids=None, add=\"if_new\", metadata=None, k=3) -> list[dict]\n\ncheck() of "
    "many texts in order as one atomic step, each also against the earlier added texts of the "
    "batch.";
constexpr const char* kStoreGet =
    "get(id) -> dict\n\nThe stored document with this id; KeyError if there is none.";
constexpr const char* kStoreRemove =
    "remove(id)\n\nRemoves the document; KeyError if there is none.";

}  // namespace doc

// ---- the module's table, by part ------------------------------------------------------------

// The bindings of Fingerprinter, keywords and jieba, fingerprint values.
void RegisterFingerprintBindings(py::module_& m) {
  py::class_<PyFingerprinter>(m, "Fingerprinter", doc::kFingerprinter)
      .def(py::init([](py::kwargs kwargs) { return new PyFingerprinter(kwargs); }))
      .def("fingerprint", &PyFingerprinter::Compute, py::arg("text"), doc::kFingerprint)
      .def("fingerprint_batch", &PyFingerprinter::ComputeBatchPy, py::arg("texts"),
           py::arg("errors") = "raise", doc::kFingerprintBatch)
      .def(
          "features",
          [](const PyFingerprinter& self, py::handle text) { return self.Features(text, 0); },
          py::arg("text"), doc::kFeatures)
      .def(
          "keywords",
          [](const PyFingerprinter& self, py::handle text, size_t top_k) {
            return self.Features(text, top_k);
          },
          py::arg("text"), py::arg("top_k") = 20, doc::kKeywords)
      .def("distance", &PyFingerprinter::TextDistance, py::arg("a"), py::arg("b"),
           doc::kTextDistance)
      .def("_records", &PyFingerprinter::Records, py::arg("texts"), py::arg("normalized") = false)
      .def_property_readonly("bits", &PyFingerprinter::bits)
      .def_property_readonly("threads", &PyFingerprinter::threads)
      .def_property_readonly(
          "options",
          [](const PyFingerprinter& self) { return OptionsDict(self.engine().options()); })
      .def(py::pickle([](const PyFingerprinter& self) { return py::dict(self.kwargs()); },
                      [](py::dict state) { return new PyFingerprinter(state); }));

  m.def("extract_tags", &ExtractTags, py::arg("text"), py::arg("top_k") = 20, py::arg("idf") = "",
        py::arg("jieba_dir") = "", doc::kExtractTags);
  m.def("cut", &Cut, py::arg("text"), py::arg("hmm") = true, doc::kCut);
  m.def("distance", &Distance, py::arg("a"), py::arg("b"), doc::kDistance);
  m.def(
      "to_hex",
      [](py::handle value, int bits) {
        Fingerprint fp = FingerprintFromObject(value, bits, "fingerprint");
        if (bits == 128 && fp.bits == 64) fp = Fingerprint::From128(0, fp.lo);
        return ToHex(fp);
      },
      py::arg("fingerprint"), py::arg("bits") = 64, doc::kToHex);
  m.def(
      "parse_fingerprint",
      [](const std::string& text) {
        return FingerprintToInt(Unwrap(ParseFingerprint(text), "fingerprint"));
      },
      py::arg("text"), doc::kParseFingerprint);
  m.def("default_thread_count", &DefaultThreadCount);
}

// The bindings of shingles, the pair rule, dedup over files and the HTML report.
void RegisterDedupBindings(py::module_& m) {
  py::class_<PyShingler>(m, "_Shingler")
      .def(py::init<bool>(), py::arg("traditional_to_simplified") = true)
      .def("batch", &PyShingler::Batch, py::arg("texts"), py::arg("threads") = 0);
  m.def("jaccard", &Jaccard, py::arg("a"), py::arg("b"), doc::kJaccard);
  py::class_<PyShingleFrequencies>(m, "_ShingleFrequencies")
      .def(py::init<size_t>(), py::arg("bytes") = DedupOptions().boilerplate_sketch_bytes)
      .def("add", &PyShingleFrequencies::Add, py::arg("sets"))
      .def("merge", &PyShingleFrequencies::Merge, py::arg("other"))
      .def("estimate", &PyShingleFrequencies::Estimate, py::arg("shingles"))
      .def_property_readonly("documents",
                             [](const PyShingleFrequencies& f) { return f.sketch().documents(); })
      .def_property_readonly("total",
                             [](const PyShingleFrequencies& f) { return f.sketch().total(); })
      .def(py::pickle(
          [](const PyShingleFrequencies& f) { return f.Serialize(); },
          [](const py::bytes& bytes) { return PyShingleFrequencies::Deserialize(bytes); }));
  m.def("_decide_pairs", &DecidePairsOfArrays, py::arg("left_hashes"), py::arg("left_sets"),
        py::arg("right_hashes"), py::arg("right_sets"), py::arg("options") = py::dict(),
        py::arg("frequencies") = nullptr, py::arg("threads") = 0,
        py::arg("left_units") = py::none(), py::arg("right_units") = py::none());
  m.def("_document_facts", &DocumentFactsOf, py::arg("texts"), py::arg("t2s") = true,
        py::arg("threads") = 0);
  m.attr("_REASONS") = py::make_tuple("none", "exact_duplicate", "whitespace_duplicate",
                                      "near_duplicate", "contained", "edited");
  m.def("_dedup_files", &DedupFiles, py::arg("inputs"), py::arg("output_dir"), py::arg("options"),
        py::arg("memory") = py::dict(), py::arg("force") = false, py::arg("write_kept") = "");
  m.def("_resolve_dedup_options", &ResolveDedupOptions, py::arg("options"));
  m.def("_write_report", &WriteReportFile, py::arg("path"), py::arg("directory"),
        py::arg("summary_json"), py::arg("clusters_jsonl"), py::arg("texts"), py::arg("options"),
        py::arg("force"));
}

// The bindings of MinHash LSH: plans and band keys.
void RegisterLshBindings(py::module_& m) {
  m.def(
      "lsh_probability",
      [](double jaccard, int bands, int rows) {
        return LshCandidateProbability(jaccard, LshParameters{bands, rows});
      },
      py::arg("jaccard"), py::arg("bands"), py::arg("rows"), doc::kLshProbability);
  m.def(
      "choose_lsh_parameters",
      [](double threshold, double recall_at_threshold, int max_signature) {
        LshPlanOptions plan;
        plan.recall_at_threshold = recall_at_threshold;
        plan.max_signature = max_signature;
        LshParameters p = Unwrap(ChooseLshParameters(threshold, plan));
        return py::make_tuple(p.bands, p.rows);
      },
      py::arg("threshold"), py::arg("recall_at_threshold") = LshPlanOptions().recall_at_threshold,
      py::arg("max_signature") = LshPlanOptions().max_signature, doc::kChooseLsh);

  py::class_<PyMinHashLsh>(m, "MinHashLsh", doc::kMinHashLsh)
      .def(py::init<double, int, int, uint32_t, uint64_t, bool>(),
           py::arg("threshold") = MinHashLshOptions().threshold, py::arg("bands") = 0,
           py::arg("rows") = 0, py::arg("bucket_window") = MinHashLshOptions().bucket_window,
           py::arg("seed") = MinHashLshOptions().seed, py::arg("t2s") = true)
      .def("band_keys", &PyMinHashLsh::BandKeys, py::arg("texts"), py::arg("threads") = 0,
           doc::kBandKeys)
      .def("signature", &PyMinHashLsh::Signature, py::arg("text"))
      .def("candidate_pairs", &PyMinHashLsh::CandidatePairs, py::arg("keys"), py::arg("has"),
           py::arg("threads") = 0, doc::kCandidatePairs)
      .def_property_readonly("bands", &PyMinHashLsh::bands)
      .def_property_readonly("rows", &PyMinHashLsh::rows)
      .def_property_readonly("threshold",
                             [](const PyMinHashLsh& self) { return self.options().threshold; })
      .def_property_readonly("bucket_window",
                             [](const PyMinHashLsh& self) { return self.options().bucket_window; })
      .def_property_readonly("seed", [](const PyMinHashLsh& self) { return self.options().seed; })
      .def(py::pickle(
          [](const PyMinHashLsh& self) {
            return py::make_tuple(self.options().threshold, self.bands(), self.rows(),
                                  self.options().bucket_window, self.options().seed, self.t2s());
          },
          [](py::tuple t) {
            return new PyMinHashLsh(t[0].cast<double>(), t[1].cast<int>(), t[2].cast<int>(),
                                    t[3].cast<uint32_t>(), t[4].cast<uint64_t>(),
                                    t[5].cast<bool>());
          }));
}

// The bindings of the in-memory Hamming index.
void RegisterIndexBindings(py::module_& m) {
  py::class_<PyIndex>(m, "HammingIndex", doc::kHammingIndex)
      .def(py::init<int, int, double, int>(), py::arg("bits") = 64, py::arg("indexed_k") = 3,
           py::arg("expected_size") = 1e6, py::arg("threads") = 0)
      .def("add", &PyIndex::Add, py::arg("ids"), py::arg("fingerprints"), doc::kIndexAdd)
      .def("remove", &PyIndex::Remove, py::arg("id"), py::arg("fingerprint"), doc::kIndexRemove)
      .def("search", &PyIndex::Search, py::arg("fingerprint"), py::arg("k"), doc::kIndexSearch)
      .def("search_batch", &PyIndex::SearchBatch, py::arg("fingerprints"), py::arg("k"),
           doc::kIndexSearchBatch)
      .def("self_join", &PyIndex::SelfJoin, py::arg("k"), doc::kIndexSelfJoin)
      .def("compact", &PyIndex::Compact)
      .def("stats", &PyIndex::Stats)
      .def("__len__", [](const PyIndex& self) { return self.index().size(); })
      .def_property_readonly("bits", [](const PyIndex& self) { return self.index().bits(); })
      .def_property_readonly("indexed_k",
                             [](const PyIndex& self) { return self.index().max_search_k(); });
}

// The bindings of the persistent store.
void RegisterStoreBindings(py::module_& m) {
  py::class_<PyStore>(m, "Store", doc::kStore)
      .def(py::init<const std::string&, bool, bool, const std::string&, bool, const py::kwargs&>(),
           py::arg("path"), py::arg("create_if_missing") = true, py::arg("error_if_exists") = false,
           py::arg("sync") = "every", py::arg("verify_checksums") = true)
      .def("add", &PyStore::Add, py::arg("id"), py::arg("fingerprint"),
           py::arg("metadata") = py::none(), doc::kStoreAdd)
      .def("add_batch", &PyStore::AddBatch, py::arg("ids"), py::arg("fingerprints"),
           py::arg("metadata") = py::none(), doc::kStoreAddBatch)
      .def("search", &PyStore::Search, py::arg("fingerprint"), py::arg("k"), py::arg("limit") = 0,
           doc::kStoreSearch)
      .def("check_and_add", &PyStore::CheckAndAdd, py::arg("id"), py::arg("fingerprint"),
           py::arg("k"), py::arg("always_add") = false, py::arg("metadata") = py::none(),
           doc::kStoreCheckAndAdd)
      .def("check", &PyStore::CheckText, py::arg("text"), py::arg("id") = py::none(),
           py::arg("add") = "if_new", py::arg("metadata") = py::none(), py::arg("k") = 3,
           doc::kStoreCheck)
      .def("check_batch", &PyStore::CheckBatch, py::arg("texts"), py::arg("ids") = py::none(),
           py::arg("add") = "if_new", py::arg("metadata") = py::none(), py::arg("k") = 3,
           doc::kStoreCheckBatch)
      .def_property_readonly("rule", &PyStore::rule)
      .def("get", &PyStore::Get, py::arg("id"), doc::kStoreGet)
      .def("remove", &PyStore::Remove, py::arg("id"), doc::kStoreRemove)
      .def("stats", &PyStore::Stats)
      .def("flush", &PyStore::Flush)
      .def("compact", &PyStore::Compact)
      .def("close", &PyStore::Close)
      .def_property_readonly("closed", &PyStore::closed)
      .def_property_readonly("fingerprint_options", &PyStore::fingerprint_options);
}

}  // namespace

DedupOptions DedupOptionsFromKeywords(const py::dict& kwargs) { return ParseDedupOptions(kwargs); }
void ThrowStatus(const Status& status) { Throw(status); }

}  // namespace neardup::python

PYBIND11_MODULE(_neardup, m) {
  using namespace neardup::python;  // NOLINT: the Register functions below
  m.doc() = "The compiled core of neardup (use the neardup package, not this module).";
  RegisterDaskBindings(m);

  RegisterFingerprintBindings(m);
  RegisterDedupBindings(m);
  RegisterLshBindings(m);
  RegisterIndexBindings(m);
  RegisterStoreBindings(m);
  RegisterStageBindings(m);
}
