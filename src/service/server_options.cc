// The server options of the option registry (neardup/options.h, kServerScope) applied to
// service::ServerOptions: what `neardup serve`'s flags set.
#include <string>

#include "neardup/options.h"
#include "neardup/server.h"
#include "service/http_input.h"

namespace neardup::service {

Status ApplyServerOptions(const OptionValues& values, ServerOptions* options) {
  if (values.Has("token") && values.Has("token_file")) {
    return Status::InvalidArgument("give " + values.NameOf("token_file") + " or " +
                                   values.NameOf("token") + ", not both");
  }
  for (const auto& [key, value] : values.values()) {
    const OptionSpec* spec = FindOption(key);
    if (spec == nullptr || !(spec->scope & kServerScope)) continue;
    if (key == "token") {
      options->token = std::get<std::string>(value);
      continue;
    }
    if (key == "token_file") {
      bool stripped_cr = false;  // a CRLF line end: the command line warns about it
      Result<std::string> token = ReadTokenFile(std::get<std::string>(value), &stripped_cr);
      if (!token.ok()) return token.status();
      options->token = std::move(*token);
      continue;
    }
    if (key == "host") {
      options->host = std::get<std::string>(value);
      continue;
    }
    if (key == "auth_reads") {
      options->auth_reads = std::get<bool>(value);
      continue;
    }
    const int64_t n = std::get<int64_t>(value);  // in the registry's range
    if (key == "port") {
      options->port = static_cast<int>(n);
    } else if (key == "poll_threads") {
      options->threads = static_cast<int>(n);
    } else if (key == "workers") {
      options->workers = static_cast<int>(n);
    } else if (key == "max_body_bytes") {
      options->max_body_bytes = static_cast<size_t>(n);
    } else if (key == "max_query_body_bytes") {
      options->max_query_body_bytes = static_cast<size_t>(n);
    } else if (key == "max_response_bytes") {
      options->max_response_bytes = static_cast<size_t>(n);
    } else if (key == "max_buffered_bytes") {
      options->max_buffered_bytes = static_cast<size_t>(n);
    } else if (key == "malloc_arenas") {
      options->malloc_arenas = static_cast<int>(n);
    } else if (key == "max_batch") {
      options->limits.max_batch = static_cast<size_t>(n);
    } else if (key == "request_timeout_seconds") {
      options->request_timeout_seconds = static_cast<int>(n);
    } else if (key == "idle_timeout_seconds") {
      options->idle_timeout_seconds = static_cast<int>(n);
    } else if (key == "max_connections") {
      options->max_connections = static_cast<int>(n);
    } else if (key == "shutdown_timeout_seconds") {
      options->shutdown_timeout_seconds = static_cast<int>(n);
    } else {
      return Status::Internal("server option " + key + " is not applied by ApplyServerOptions");
    }
  }
  return Status::Ok();
}

}  // namespace neardup::service
