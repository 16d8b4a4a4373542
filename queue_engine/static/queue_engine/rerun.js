// The payload editor of "rerun from a node": checks the text as the operator types, as
// JSON and against the kind's parameters (names, required ones, JSON types), and keeps
// the rerun button disabled while it is wrong. The server checks it again.
(function () {
  "use strict";
  var editor = document.querySelector("[data-payload-editor]");
  var schemaNode = document.getElementById("payload-schema");
  if (!editor || !schemaNode) return;
  var schema = JSON.parse(schemaNode.textContent);
  var status = document.getElementById(editor.getAttribute("aria-describedby"));
  var submit = document.querySelector("[data-payload-submit]");

  function typeOf(value) {
    if (value === null) return "null";
    if (Array.isArray(value)) return "array";
    if (typeof value === "number") return Number.isInteger(value) ? "integer" : "number";
    return typeof value;  // string, boolean, object
  }

  function problems(text) {
    var value;
    try {
      value = JSON.parse(text);
    } catch (error) {
      return ["Not JSON yet: " + error.message];
    }
    if (typeOf(value) !== "object") return ["The payload must be a JSON object ({ ... })."];
    var found = [];
    var known = {};
    schema.parameters.forEach(function (param) {
      known[param.name] = true;
      if (!(param.name in value)) {
        if (param.required) found.push("Missing required parameter \u201c" + param.name + "\u201d.");
        return;
      }
      var type = typeOf(value[param.name]);
      if (param.types.length && param.types.indexOf(type) === -1) {
        found.push("\u201c" + param.name + "\u201d should be " + param.types.join(" or ") + ", not " + type + ".");
      }
    });
    if (!schema.open) {
      Object.keys(value).forEach(function (key) {
        if (!known[key]) found.push("Unknown parameter \u201c" + key + "\u201d: the handler does not take it.");
      });
    }
    return found;
  }

  function check() {
    var found = problems(editor.value);
    status.textContent = found.length ? found.join(" ") : "Valid: a JSON object that fits the parameters.";
    status.classList.toggle("bad", found.length > 0);
    status.classList.toggle("good", found.length === 0);
    editor.setAttribute("aria-invalid", found.length ? "true" : "false");
    if (submit) submit.disabled = found.length > 0;
  }

  editor.addEventListener("input", check);
  editor.addEventListener("keydown", function (event) {
    if (event.key === "Tab" && !event.shiftKey && !event.ctrlKey && !event.altKey) {
      // Two spaces, as the JSON is indented; Esc then Tab leaves the field.
      if (editor.dataset.escaped === "yes") { editor.dataset.escaped = ""; return; }
      event.preventDefault();
      editor.setRangeText("  ", editor.selectionStart, editor.selectionEnd, "end");
      check();
    } else {
      editor.dataset.escaped = event.key === "Escape" ? "yes" : "";
    }
  });
  check();
})();
