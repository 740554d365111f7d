// A minimal JSON writer for run reports (objects, arrays, numbers, strings, booleans).
#pragma once

#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

namespace apron {

class Json {
 public:
  Json& begin_object(const std::string& key = "") { return open(key, '{'); }
  Json& end_object() { return close('}'); }
  Json& begin_array(const std::string& key = "") { return open(key, '['); }
  Json& end_array() { return close(']'); }
  Json& value(const std::string& key, double v) {
    prefix(key);
    if (std::isfinite(v)) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.17g", v);
      out_ << buf;
    } else {
      out_ << "null";
    }
    return *this;
  }
  Json& value(const std::string& key, long long v) { return prefix(key), out_ << v, *this; }
  Json& value(const std::string& key, int v) { return value(key, static_cast<long long>(v)); }
  Json& value(const std::string& key, std::size_t v) { return prefix(key), out_ << v, *this; }
  Json& value(const std::string& key, bool v) {
    return prefix(key), out_ << (v ? "true" : "false"), *this;
  }
  Json& value(const std::string& key, const std::string& v) {
    prefix(key);
    quote(v);
    return *this;
  }
  Json& value(const std::string& key, const char* v) { return value(key, std::string(v)); }
  // An array of the values of a range, each written as value() writes its type.
  template <class Range>
  Json& values(const std::string& key, const Range& items) {
    begin_array(key);
    for (const auto& item : items) value("", item);
    return end_array();
  }
  std::string str() const { return out_.str() + "\n"; }

 private:
  Json& open(const std::string& key, char c) {
    prefix(key);
    out_ << c;
    first_.push_back(true);
    return *this;
  }
  Json& close(char c) {
    first_.pop_back();
    out_ << "\n" << std::string(2 * first_.size(), ' ') << c;
    return *this;
  }
  void prefix(const std::string& key) {
    if (!first_.empty()) {
      if (!first_.back()) out_ << ",";
      first_.back() = false;
      out_ << "\n" << std::string(2 * first_.size(), ' ');
    }
    if (!key.empty()) {
      quote(key);
      out_ << ": ";
    }
  }
  void quote(const std::string& s) {
    out_ << '"';
    for (char c : s) {
      switch (c) {
        case '"':
          out_ << "\\\"";
          break;
        case '\\':
          out_ << "\\\\";
          break;
        case '\n':
          out_ << "\\n";
          break;
        case '\t':
          out_ << "\\t";
          break;
        default:
          if (static_cast<unsigned char>(c) < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out_ << buf;
          } else {
            out_ << c;
          }
      }
    }
    out_ << '"';
  }
  std::ostringstream out_;
  std::vector<bool> first_;
};

}  // namespace apron
