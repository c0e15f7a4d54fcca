"""Checks HTTP exchanges against schemas/openapi.json.

The e2e tests call validate_response() on every response they receive, so
the OpenAPI document and the server cannot drift apart unnoticed:

    import openapi_check
    SPEC = openapi_check.load_spec()
    r = requests.get(base + "/v2/models/digits")
    openapi_check.validate_response(SPEC, "GET", "/v2/models/digits", r.status_code,
                                    r.headers.get("Content-Type"), r.content, r.headers)

The operation is found by matching the path against the document's path
templates (concrete paths before templated ones), the response by status
code (then "4XX"-style ranges, then "default"), the media type by the
Content-Type header. JSON bodies are validated with JSON Schema 2020-12
(Debian's python3-jsonschema), resolving "$ref" into the document's
components. Binary tensor data bodies (application/octet-stream) are split
at Inference-Header-Content-Length; the JSON header is validated against
the media type's "x-mcp-json-header" schema and the binary part must hold
exactly the bytes the header announces. Any mismatch raises AssertionError
with a message that says what and where.

check_document() runs the structural checks the self-test uses. Only the
standard library and jsonschema are needed.
"""

import copy
import json
import pathlib
import re
import struct

import jsonschema

SPEC_PATH = pathlib.Path(__file__).resolve().parents[2] / "schemas" / "openapi.json"

# Bytes per element on the wire (binary tensor data extension); BYTES varies.
ELEMENT_SIZE = {
    "BOOL": 1, "UINT8": 1, "UINT16": 2, "UINT32": 4, "UINT64": 8,
    "INT8": 1, "INT16": 2, "INT32": 4, "INT64": 8,
    "FP16": 2, "FP32": 4, "FP64": 8, "BF16": 2,
}

HTTP_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
HEADER_LENGTH = "Inference-Header-Content-Length"
JSON_HEADER_KEY = "x-mcp-json-header"


def load_spec(path=SPEC_PATH):
    """The OpenAPI document as a dict."""
    with open(path, "rb") as f:
        return json.loads(f.read().decode("utf-8"))


# ---- path and media type matching ----

_template_cache = {}


def _template_regex(template):
    rx = _template_cache.get(template)
    if rx is None:
        parts, pos = [], 0
        for m in re.finditer(r"\{([^{}/]+)\}", template):
            parts.append(re.escape(template[pos:m.start()]))
            # A model name may be a tenant's "tenant/name" (one slash).
            one = "[^/]+(?:/[^/]+)?" if m.group(1) == "model" else "[^/]+"
            parts.append("(?P<%s>%s)" % (re.sub(r"\W", "_", m.group(1)), one))
            pos = m.end()
        parts.append(re.escape(template[pos:]))
        rx = _template_cache[template] = re.compile("^" + "".join(parts) + "$")
    return rx


def find_operation(spec, method, path):
    """(template, operation, path parameters) for method and a concrete path
    (a query string is ignored). Raises AssertionError when the document
    has no such operation."""
    path = path.split("?", 1)[0].split("#", 1)[0]
    method = method.lower()
    matches = []
    for template, item in spec.get("paths", {}).items():
        m = _template_regex(template).match(path)
        if m:
            literal = len(re.sub(r"\{[^{}/]+\}", "", template))
            matches.append((template.count("{"), -literal, template, item, m.groupdict()))
    if not matches:
        raise AssertionError("no path in the OpenAPI document matches %s %s" % (method.upper(), path))
    # The most specific template decides (concrete before templated, then
    # more literal characters), as a router would: a method it lacks is an
    # error, not a reason to fall back to a vaguer template.
    matches.sort(key=lambda t: t[:3])
    _, _, template, item, params = matches[0]
    if method in item:
        return template, item[method], params
    raise AssertionError("the OpenAPI document has no %s operation for %s (path %s allows: %s)" % (
        method.upper(), path, matches[0][2],
        ", ".join(k.upper() for k in matches[0][3] if k in HTTP_METHODS)))


def resolve(spec, node):
    """Follows a local "$ref" (and chains of them) to the object it names."""
    seen = 0
    while isinstance(node, dict) and "$ref" in node and len(node) == 1:
        node = _pointer(spec, node["$ref"])
        seen += 1
        if seen > 32:
            raise AssertionError("reference loop at %s" % node)
    return node


def _pointer(spec, ref):
    if not ref.startswith("#/"):
        raise AssertionError("only local references are supported: %r" % ref)
    node = spec
    for token in ref[2:].split("/"):
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            raise AssertionError("reference %r does not resolve (no %r)" % (ref, token))
    return node


def _media_type(value):
    """("type/subtype", {param: value}) with names lowercased."""
    fields = [f.strip() for f in (value or "").split(";")]
    params = {}
    for f in fields[1:]:
        if "=" in f:
            k, v = f.split("=", 1)
            params[k.strip().lower()] = v.strip().strip('"')
    return fields[0].lower(), params


def _pick_media(content, content_type, where):
    essence, params = _media_type(content_type)
    for key, media in content.items():
        k_essence, k_params = _media_type(key)
        if k_essence == essence and all(params.get(p) == v for p, v in k_params.items()):
            return key, media
    raise AssertionError("%s: Content-Type %r is not one the document allows (%s)" % (
        where, content_type, ", ".join(content)))


def _header(headers, name):
    if headers is None:
        return None
    for k, v in headers.items():
        if k.lower() == name.lower():
            return v
    return None


# ---- schema validation ----

_validator_cache = {}


def _validator(spec, schema):
    key = (id(spec), json.dumps(schema, sort_keys=True))
    v = _validator_cache.get(key)
    if v is None:
        # The schema becomes the root of a document that also holds the
        # components, so "#/components/..." references resolve without a
        # resolver (works with old and new jsonschema alike).
        root = dict(copy.deepcopy(schema)) if isinstance(schema, dict) else schema
        if isinstance(root, dict):
            root["components"] = spec.get("components", {})
        v = _validator_cache[key] = jsonschema.Draft202012Validator(root)
    return v


def _describe(error):
    where = "$" + "".join("[%d]" % p if isinstance(p, int) else ".%s" % p for p in error.absolute_path)
    msg = "at %s: %s" % (where, error.message)
    if error.context:
        inner = jsonschema.exceptions.best_match(error.context)
        if inner is not None:
            inner_where = "$" + "".join("[%d]" % p if isinstance(p, int) else ".%s" % p for p in inner.absolute_path)
            msg += " (closest: at %s: %s)" % (inner_where, inner.message)
    return msg


def validate_instance(spec, schema, instance, where="body"):
    """Validates instance against schema (which may "$ref" the components)."""
    errors = sorted(_validator(spec, schema).iter_errors(instance), key=lambda e: list(e.absolute_path))
    if errors:
        lines = [_describe(e) for e in errors[:5]]
        more = " (and %d more)" % (len(errors) - 5) if len(errors) > 5 else ""
        raise AssertionError("%s does not match the OpenAPI schema:\n  %s%s" % (where, "\n  ".join(lines), more))


def _reject_constant(name):
    raise ValueError("%s is not JSON" % name)


def _no_duplicates(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise ValueError("duplicate key %r" % k)
        out[k] = v
    return out


def parse_json(data, where="body"):
    """Strict JSON: UTF-8, no NaN/Infinity, no duplicate keys."""
    try:
        text = bytes(data).decode("utf-8")
        return json.loads(text, parse_constant=_reject_constant, object_pairs_hook=_no_duplicates)
    except (UnicodeDecodeError, ValueError) as e:
        raise AssertionError("%s is not valid JSON: %s; starts %r" % (where, e, bytes(data[:80])))


# ---- binary tensor data ----

def _numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def _check_binary_part(header, blob, tensors_key, where):
    """The binary part holds exactly the tensors whose JSON entries carry
    binary_data_size, in order, each of the size its shape and datatype need."""
    offset = 0
    for i, t in enumerate(header.get(tensors_key) or []):
        size = (t.get("parameters") or {}).get("binary_data_size")
        if size is None:
            continue
        name = "%s %s[%d] '%s'" % (where, tensors_key, i, t.get("name"))
        if offset + size > len(blob):
            raise AssertionError("%s: binary_data_size %d runs past the body (%d binary bytes left)" % (
                name, size, len(blob) - offset))
        chunk = blob[offset:offset + size]
        datatype, shape = t.get("datatype"), t.get("shape") or []
        if datatype == "BYTES":
            pos, count = 0, 0
            while pos < len(chunk):
                if pos + 4 > len(chunk):
                    raise AssertionError("%s: BYTES element %d has a cut length prefix" % (name, count))
                (n,) = struct.unpack_from("<I", chunk, pos)
                pos += 4 + n
                count += 1
                if pos > len(chunk):
                    raise AssertionError("%s: BYTES element %d runs past its %d bytes" % (name, count - 1, size))
            if count != _numel(shape):
                raise AssertionError("%s: %d BYTES elements, shape %s needs %d" % (name, count, shape, _numel(shape)))
        elif datatype in ELEMENT_SIZE:
            want = _numel(shape) * ELEMENT_SIZE[datatype]
            if size != want:
                raise AssertionError("%s: binary_data_size %d, but %s %s needs %d bytes" % (
                    name, size, datatype, shape, want))
        offset += size
    if offset != len(blob):
        raise AssertionError("%s: the binary part is %d bytes, the JSON header announces %d" % (
            where, len(blob), offset))


def _check_body(spec, content, content_type, body, headers, where, tensors_key):
    """Validates one body against an OpenAPI content map; returns what it parsed."""
    body = bytes(body or b"")
    if not content:
        if body:
            raise AssertionError("%s: the document describes no body, got %d bytes starting %r" % (
                where, len(body), body[:80]))
        return None
    if not body and not content_type:
        raise AssertionError("%s: empty body without Content-Type; the document expects one of %s" % (
            where, ", ".join(content)))
    key, media = _pick_media(content, content_type, where)
    schema = media.get("schema", {})
    essence, _ = _media_type(key)
    if JSON_HEADER_KEY in media:
        raw = _header(headers, HEADER_LENGTH)
        if raw is None:
            raise AssertionError("%s: %s body without the %s header (pass the headers)" % (where, key, HEADER_LENGTH))
        if not re.fullmatch(r"[0-9]+", str(raw).strip()):
            raise AssertionError("%s: %s %r is not a non-negative integer" % (where, HEADER_LENGTH, raw))
        n = int(str(raw).strip())
        if n > len(body):
            raise AssertionError("%s: %s %d exceeds the body's %d bytes" % (where, HEADER_LENGTH, n, len(body)))
        if n == 0:
            if tensors_key == "outputs":
                raise AssertionError("%s: a response's JSON header cannot be empty (%s: 0)" % (where, HEADER_LENGTH))
            return None, body  # raw request form: the whole body is the single input
        header = parse_json(body[:n], where + " JSON header")
        validate_instance(spec, media[JSON_HEADER_KEY], header, where + " JSON header")
        _check_binary_part(header, body[n:], tensors_key, where)
        return header, body[n:]
    if essence == "application/json" or essence.endswith("+json"):
        value = parse_json(body, where)
        validate_instance(spec, schema, value, where)
        return value
    if essence.startswith("text/"):
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError as e:
            raise AssertionError("%s: text body is not UTF-8: %s" % (where, e))
        validate_instance(spec, schema, text, where)
        return text
    return body


# ---- public checks ----

def select_response(spec, operation, status):
    """The response object for a status: exact code, then "4XX" range, then "default"."""
    responses = operation.get("responses", {})
    for key in (str(status), "%dXX" % (int(status) // 100), "default"):
        if key in responses:
            return key, resolve(spec, responses[key])
    raise AssertionError("operation %s documents no response %s (documented: %s)" % (
        operation.get("operationId"), status, ", ".join(responses)))


def validate_response(spec, method, path, status, content_type, body_bytes, headers=None):
    """Checks one response against the document; raises AssertionError.

    Returns the parsed body: a JSON value, the text of a text/* body, a
    (JSON header, binary bytes) pair for binary tensor data, or None when the
    document describes no body. `headers` (any mapping; needed for binary
    bodies) supplies Inference-Header-Content-Length."""
    template, operation, _ = find_operation(spec, method, path)
    key, response = select_response(spec, operation, status)
    where = "%s %s -> %s (%s, response %s)" % (method.upper(), path, status, template, key)
    return _check_body(spec, response.get("content"), content_type, body_bytes, headers, where, "outputs")


def validate_request(spec, method, path, content_type, body_bytes, headers=None):
    """Checks a request body the tests send (same rules as responses)."""
    template, operation, _ = find_operation(spec, method, path)
    body_spec = resolve(spec, operation.get("requestBody") or {})
    where = "%s %s (%s, request body)" % (method.upper(), path, template)
    if not body_bytes and not body_spec.get("required", False):
        return None
    return _check_body(spec, body_spec.get("content"), content_type, body_bytes, headers, where, "inputs")


def _walk(node, path=""):
    yield path, node
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _walk(v, "%s/%s" % (path, k.replace("~", "~0").replace("/", "~1")))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _walk(v, "%s/%d" % (path, i))


def iter_schemas(spec):
    """(location, schema) for every component schema and every schema used by
    a parameter, header or media type (including x-mcp-json-header)."""
    for name, schema in spec.get("components", {}).get("schemas", {}).items():
        yield "#/components/schemas/" + name, schema
    for loc, node in _walk(spec):
        if loc.startswith("/components/schemas"):
            continue
        if not isinstance(node, dict):
            continue
        parent = loc.rsplit("/", 2)
        is_media = len(parent) == 3 and parent[1] == "content"
        is_param = "in" in node and "name" in node
        is_header = len(parent) == 3 and parent[1] == "headers"
        if is_media or is_param or is_header:
            for k in ("schema", JSON_HEADER_KEY):
                if k in node:
                    yield "#%s/%s" % (loc, k), node[k]


def check_document(spec):
    """Structural problems of the document, as a list of sentences (empty = fine)."""
    problems = []
    if not str(spec.get("openapi", "")).startswith("3.1."):
        problems.append("openapi must be 3.1.x, is %r" % spec.get("openapi"))
    info = spec.get("info", {})
    for k in ("title", "version"):
        if not info.get(k):
            problems.append("info.%s is missing" % k)

    for loc, node in _walk(spec):
        if isinstance(node, dict) and isinstance(node.get("$ref"), str):
            try:
                _pointer(spec, node["$ref"])
            except AssertionError as e:
                problems.append("#%s: %s" % (loc, e))

    for loc, schema in iter_schemas(spec):
        try:
            jsonschema.Draft202012Validator.check_schema(schema)
        except jsonschema.exceptions.SchemaError as e:
            problems.append("%s is not a valid JSON Schema 2020-12: %s" % (loc, e.message))
        for i, example in enumerate(schema.get("examples", []) if isinstance(schema, dict) else []):
            try:
                validate_instance(spec, schema, example, "%s examples[%d]" % (loc, i))
            except AssertionError as e:
                problems.append(str(e))

    op_ids = {}
    for template, item in spec.get("paths", {}).items():
        if not template.startswith("/"):
            problems.append("path %r does not start with /" % template)
        names = set(re.findall(r"\{([^{}/]+)\}", template))
        for method in (m for m in item if m in HTTP_METHODS):
            op = item[method]
            where = "%s %s" % (method.upper(), template)
            params = [resolve(spec, p) for p in item.get("parameters", []) + op.get("parameters", [])]
            declared = {p.get("name") for p in params if p.get("in") == "path"}
            if declared != names:
                problems.append("%s: path parameters declared %s, template has %s" % (
                    where, sorted(declared), sorted(names)))
            for p in params:
                if p.get("in") == "path" and p.get("required") is not True:
                    problems.append("%s: path parameter %r must be required" % (where, p.get("name")))
                if "schema" not in p and "content" not in p:
                    problems.append("%s: parameter %r has no schema" % (where, p.get("name")))
            oid = op.get("operationId")
            if not oid:
                problems.append("%s: no operationId" % where)
            elif oid in op_ids:
                problems.append("%s: operationId %r already used by %s" % (where, oid, op_ids[oid]))
            else:
                op_ids[oid] = where
            responses = op.get("responses", {})
            if not any(k.startswith("2") for k in responses):
                problems.append("%s: no 2xx response" % where)
            if "default" not in responses:
                problems.append("%s: no default (error) response" % where)
            for code, r in responses.items():
                if not (code == "default" or re.fullmatch(r"[1-5](?:[0-9]{2}|XX)", code)):
                    problems.append("%s: response key %r is not a status code" % (where, code))
                    continue
                r = resolve(spec, r)
                if not r.get("description"):
                    problems.append("%s: response %s has no description" % (where, code))
                if code[0] in "45" or code == "default":
                    # Every error must admit {"error": "..."} as JSON; the
                    # OpenAI-compatible API's, OpenAI's own error object.
                    media = (r.get("content") or {}).get("application/json")
                    if not media:
                        problems.append("%s: error response %s has no application/json body" % (where, code))
                        continue
                    openai = "openai" in (op.get("tags") or [])
                    body = ({"error": {"message": "x", "type": "invalid_request_error", "param": None, "code": None}}
                            if openai else {"error": "x"})
                    try:
                        validate_instance(spec, media.get("schema", {}), body, "error body")
                    except AssertionError:
                        problems.append("%s: error response %s does not admit %s" % (where, code, json.dumps(body)))
                for key, media in (r.get("content") or {}).items():
                    if JSON_HEADER_KEY in media and _media_type(key)[0] != "application/octet-stream":
                        problems.append("%s: %s only belongs on application/octet-stream" % (where, JSON_HEADER_KEY))
                    if "schema" not in media:
                        problems.append("%s: response %s %s has no schema" % (where, code, key))
    return problems
