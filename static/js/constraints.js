// The constraints page by keyboard, as the review queue: j/k move between violations,
// r retracts the row's newest fact, c puts the cursor in its correction, x makes its
// entity an exception, u undoes the last fix (the flash message's Undo).
(function () {
  "use strict";
  function rows() {
    return Array.prototype.slice.call(document.querySelectorAll(".violation"));
  }
  var current = -1;
  function focusAt(index) {
    var all = rows();
    if (!all.length) return;
    current = Math.max(0, Math.min(index, all.length - 1));
    all.forEach(function (row, i) {
      row.classList.toggle("focused", i === current);
      if (i === current) row.setAttribute("aria-current", "true");
      else row.removeAttribute("aria-current");
    });
    all[current].focus({ preventScroll: true });
    all[current].scrollIntoView({ block: "nearest" });
  }
  function within(selector) {
    var row = rows()[current];
    return row ? row.querySelector(selector) : null;
  }
  document.addEventListener("DOMContentLoaded", function () {
    var list = document.getElementById("violations");
    if (list) focusAt(parseInt(list.getAttribute("data-focus") || "0", 10) || 0);
  });
  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    var target = event.target;
    if (target && /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName)) {
      if (event.key === "Escape") target.blur();
      return;
    }
    var key = event.key;
    var control;
    if (key === "j") focusAt(current + 1);
    else if (key === "k") focusAt(current - 1);
    else if (key === "r" || key === "x") {
      control = within('button[data-key="' + key + '"]');
      if (!control) return;
      control.click();
    } else if (key === "c") {
      control = within('input[data-key="c"]');
      if (!control) return;
      control.focus();
    } else if (key === "u") {
      control = document.querySelector("#flash form[action*='/undo'] button");
      if (!control) return;
      control.click();
    } else return;
    event.preventDefault();
  });
})();
