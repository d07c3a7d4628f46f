#pragma once

#include <stdexcept>
#include <string>

namespace tandem::rt {

// An error answered in OpenAI's shape: {"error": {"message", "type", "code", "param"}}
// with an HTTP status. The message names the field or limit at fault.
class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message, std::string type, std::string code = "", std::string param = "")
      : std::runtime_error(message), status_(status), type_(std::move(type)), code_(std::move(code)), param_(std::move(param)) {}

  int status() const { return status_; }
  const std::string& type() const { return type_; }
  const std::string& code() const { return code_; }
  const std::string& param() const { return param_; }

  static ApiError BadRequest(std::string message, std::string param = "") {
    return ApiError(400, std::move(message), "invalid_request_error", "invalid_value", std::move(param));
  }

 private:
  int status_;
  std::string type_;
  std::string code_;
  std::string param_;
};

}  // namespace tandem::rt
