#include "server/core/yaml_message.h"

#include <yaml.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/reflection.h"

namespace tandem::server {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

class Mapper {
 public:
  explicit Mapper(yaml_document_t* doc) : doc_(doc) {}

  absl::Status Fill(yaml_node_t* node, const std::string& path, Message* out) {
    TANDEM_RETURN_IF_ERROR(Visit());
    if (node->type == YAML_SCALAR_NODE && IsNull(node)) return absl::OkStatus();  // {} or empty
    if (node->type != YAML_MAPPING_NODE) {
      return Error(node, path, "expected a mapping of field names");
    }
    const Reflection* r = out->GetReflection();
    for (yaml_node_pair_t* p = node->data.mapping.pairs.start; p < node->data.mapping.pairs.top;
         ++p) {
      yaml_node_t* key = yaml_document_get_node(doc_, p->key);
      yaml_node_t* value = yaml_document_get_node(doc_, p->value);
      if (key == nullptr || value == nullptr) return Error(node, path, "a broken mapping");
      if (key->type != YAML_SCALAR_NODE) return Error(key, path, "a key must be a field name");
      const std::string name = Text(key);
      const std::string at = path.empty() ? name : absl::StrCat(path, ".", name);
      const FieldDescriptor* f = out->GetDescriptor()->FindFieldByName(name);
      if (f == nullptr) {
        return Error(key, at, absl::StrCat("no such field in ", out->GetDescriptor()->name()));
      }
      if (f->is_repeated() ? r->FieldSize(*out, f) > 0 : r->HasField(*out, f)) {
        return Error(key, at, "given twice");
      }
      if (const auto* oneof = f->real_containing_oneof();
          oneof != nullptr && r->HasOneof(*out, oneof)) {
        return Error(key, at, absl::StrCat("a second member of oneof ", oneof->name()));
      }
      if (f->is_map()) return Error(key, at, "map fields are not supported in YAML documents");
      if (f->is_repeated()) {
        TANDEM_RETURN_IF_ERROR(FillRepeated(value, at, f, out));
      } else {
        TANDEM_RETURN_IF_ERROR(FillOne(value, at, f, out, /*index=*/-1));
      }
    }
    return absl::OkStatus();
  }

 private:
  absl::Status Visit() {
    if (++visited_ > kMaxYamlNodes) {
      return absl::InvalidArgumentError(
          absl::StrCat("the YAML document has more than ", kMaxYamlNodes, " nodes"));
    }
    return absl::OkStatus();
  }

  static std::string Text(const yaml_node_t* n) {
    return std::string(reinterpret_cast<const char*>(n->data.scalar.value), n->data.scalar.length);
  }
  // A plain (unquoted) scalar that YAML reads as null: "", "~", "null".
  static bool IsNull(const yaml_node_t* n) {
    if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) return false;
    const std::string t = Text(n);
    return t.empty() || t == "~" || t == "null" || t == "Null" || t == "NULL";
  }
  static absl::Status Error(const yaml_node_t* n, const std::string& path, absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(path.empty() ? "the document" : path, " (line ",
                                                   n->start_mark.line + 1, "): ", what));
  }

  absl::Status FillRepeated(yaml_node_t* node, const std::string& path, const FieldDescriptor* f,
                            Message* out) {
    TANDEM_RETURN_IF_ERROR(Visit());
    if (node->type != YAML_SEQUENCE_NODE) {
      return Error(node, path, "a repeated field takes a sequence ([a, b] or - items)");
    }
    int i = 0;
    for (yaml_node_item_t* it = node->data.sequence.items.start; it < node->data.sequence.items.top;
         ++it, ++i) {
      yaml_node_t* item = yaml_document_get_node(doc_, *it);
      if (item == nullptr) return Error(node, path, "a broken sequence");
      TANDEM_RETURN_IF_ERROR(FillOne(item, absl::StrCat(path, "[", i, "]"), f, out, i));
    }
    return absl::OkStatus();
  }

  // One value of `f` (index >= 0: appended to the repeated field).
  absl::Status FillOne(yaml_node_t* node, const std::string& path, const FieldDescriptor* f,
                       Message* out, int index) {
    const Reflection* r = out->GetReflection();
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      Message* m = index >= 0 ? r->AddMessage(out, f) : r->MutableMessage(out, f);
      return Fill(node, path, m);
    }
    TANDEM_RETURN_IF_ERROR(Visit());
    if (node->type != YAML_SCALAR_NODE) return Error(node, path, "expected a single value");
    if (IsNull(node)) {  // "key:", "key: ~": the field stays unset
      if (index >= 0) return Error(node, path, "a null item");
      return absl::OkStatus();
    }
    const std::string text = Text(node);
    const bool quoted = node->data.scalar.style != YAML_PLAIN_SCALAR_STYLE;
    auto bad = [&](absl::string_view kind) {
      return Error(node, path, absl::StrCat("expected ", kind, ", got '", text, "'"));
    };
    const bool add = index >= 0;
    switch (f->cpp_type()) {
      case FieldDescriptor::CPPTYPE_INT32: {
        int32_t v;
        if (quoted || !absl::SimpleAtoi(text, &v)) return bad("a 32-bit integer");
        add ? r->AddInt32(out, f, v) : r->SetInt32(out, f, v);
        break;
      }
      case FieldDescriptor::CPPTYPE_INT64: {
        int64_t v;
        if (quoted || !absl::SimpleAtoi(text, &v)) return bad("an integer");
        add ? r->AddInt64(out, f, v) : r->SetInt64(out, f, v);
        break;
      }
      case FieldDescriptor::CPPTYPE_UINT32: {
        uint32_t v;
        if (quoted || text.find('-') != std::string::npos || !absl::SimpleAtoi(text, &v)) {
          return bad("an unsigned 32-bit integer");
        }
        add ? r->AddUInt32(out, f, v) : r->SetUInt32(out, f, v);
        break;
      }
      case FieldDescriptor::CPPTYPE_UINT64: {
        uint64_t v;
        if (quoted || text.find('-') != std::string::npos || !absl::SimpleAtoi(text, &v)) {
          return bad("an unsigned integer");
        }
        add ? r->AddUInt64(out, f, v) : r->SetUInt64(out, f, v);
        break;
      }
      case FieldDescriptor::CPPTYPE_DOUBLE:
      case FieldDescriptor::CPPTYPE_FLOAT: {
        double v;
        const std::string lower = absl::AsciiStrToLower(text);
        if (quoted) return bad("a number");
        if (lower == ".inf" || lower == "+.inf") {
          v = std::numeric_limits<double>::infinity();
        } else if (lower == "-.inf") {
          v = -std::numeric_limits<double>::infinity();
        } else if (lower == ".nan") {
          v = std::numeric_limits<double>::quiet_NaN();
        } else if (!absl::SimpleAtod(text, &v)) {
          return bad("a number");
        }
        if (f->cpp_type() == FieldDescriptor::CPPTYPE_FLOAT) {
          add ? r->AddFloat(out, f, static_cast<float>(v))
              : r->SetFloat(out, f, static_cast<float>(v));
        } else {
          add ? r->AddDouble(out, f, v) : r->SetDouble(out, f, v);
        }
        break;
      }
      case FieldDescriptor::CPPTYPE_BOOL: {
        bool v;
        if (quoted) return bad("true or false");
        if (text == "true" || text == "True" || text == "TRUE") {
          v = true;
        } else if (text == "false" || text == "False" || text == "FALSE") {
          v = false;
        } else {
          return bad("true or false");
        }
        add ? r->AddBool(out, f, v) : r->SetBool(out, f, v);
        break;
      }
      case FieldDescriptor::CPPTYPE_ENUM: {
        const auto* value = f->enum_type()->FindValueByName(text);
        if (value == nullptr) {
          return bad(absl::StrCat("a value of enum ", f->enum_type()->name()));
        }
        add ? r->AddEnum(out, f, value) : r->SetEnum(out, f, value);
        break;
      }
      case FieldDescriptor::CPPTYPE_STRING: {
        std::string v = text;
        if (f->type() == FieldDescriptor::TYPE_BYTES) {
          // Bytes are base64 (YAML's !!binary), as in the JSON mapping.
          if (!absl::Base64Unescape(text, &v)) return bad("base64 bytes");
        }
        add ? r->AddString(out, f, std::move(v)) : r->SetString(out, f, std::move(v));
        break;
      }
      default:
        return Error(node, path, "unsupported field type");
    }
    return absl::OkStatus();
  }

  yaml_document_t* doc_;
  size_t visited_ = 0;
};

struct ParserDelete {
  void operator()(yaml_parser_t* p) const {
    yaml_parser_delete(p);
    delete p;
  }
};
struct DocumentDelete {
  void operator()(yaml_document_t* d) const {
    yaml_document_delete(d);
    delete d;
  }
};

}  // namespace

absl::Status ParseYamlMessage(absl::string_view yaml, google::protobuf::Message* out) {
  out->Clear();
  if (yaml.size() > kMaxYamlBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("the YAML document is over ", kMaxYamlBytes, " bytes"));
  }
  std::unique_ptr<yaml_parser_t, ParserDelete> parser(new yaml_parser_t);
  if (yaml_parser_initialize(parser.get()) == 0) {
    delete parser.release();
    return absl::ResourceExhaustedError("cannot initialize the YAML parser");
  }
  yaml_parser_set_input_string(parser.get(), reinterpret_cast<const unsigned char*>(yaml.data()),
                               yaml.size());
  std::unique_ptr<yaml_document_t, DocumentDelete> doc(new yaml_document_t);
  if (yaml_parser_load(parser.get(), doc.get()) == 0) {
    delete doc.release();  // not initialized: nothing to delete inside
    return absl::InvalidArgumentError(
        absl::StrCat("not YAML (line ", parser->problem_mark.line + 1, ", column ",
                     parser->problem_mark.column + 1,
                     "): ", parser->problem != nullptr ? parser->problem : "a syntax error",
                     parser->context != nullptr ? absl::StrCat(" ", parser->context) : ""));
  }
  yaml_node_t* root = yaml_document_get_root_node(doc.get());
  if (root == nullptr) return absl::InvalidArgumentError("the YAML document is empty");
  // One document only: a second would be silently ignored otherwise.
  yaml_document_t next;
  if (yaml_parser_load(parser.get(), &next) != 0) {
    const bool another = yaml_document_get_root_node(&next) != nullptr;
    yaml_document_delete(&next);
    if (another) return absl::InvalidArgumentError("the file holds more than one YAML document");
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("not YAML after the first document (line ", parser->problem_mark.line + 1,
                     "): ", parser->problem != nullptr ? parser->problem : "a syntax error"));
  }
  Mapper mapper(doc.get());
  absl::Status s = mapper.Fill(root, "", out);
  if (!s.ok()) out->Clear();
  return s;
}

}  // namespace tandem::server
