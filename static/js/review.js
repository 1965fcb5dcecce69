// The review queue by keyboard: j/k move between pending facts, a accepts, r rejects,
// e opens the fact to edit it, u undoes the last decision (the flash message's Undo).
(function () {
  "use strict";
  function items() {
    return Array.prototype.slice.call(document.querySelectorAll(".review-item"));
  }
  var current = -1;
  function focusAt(index) {
    var all = items();
    if (!all.length) return;
    current = Math.max(0, Math.min(index, all.length - 1));
    all.forEach(function (item, i) {
      item.classList.toggle("focused", i === current);
      if (i === current) item.setAttribute("aria-current", "true");
      else item.removeAttribute("aria-current");
    });
    all[current].focus({ preventScroll: true });
    all[current].scrollIntoView({ block: "nearest" });
  }
  function press(key) {
    var item = items()[current];
    if (!item) return;
    var button = item.querySelector('button[data-key="' + key + '"]');
    if (!button) return;
    // After the decision the page comes back with the next fact where this one was.
    var field = item.querySelector(".focus-field");
    if (field) field.value = String(current);
    button.click();
  }
  document.addEventListener("DOMContentLoaded", function () {
    var list = document.getElementById("review");
    if (list) focusAt(parseInt(list.getAttribute("data-focus") || "0", 10) || 0);
  });
  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    var target = event.target;
    if (target && /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName)) return;
    var key = event.key;
    if (key === "j") focusAt(current + 1);
    else if (key === "k") focusAt(current - 1);
    else if (key === "a" || key === "r") press(key);
    else if (key === "e") {
      var link = items()[current] && items()[current].querySelector(".edit-link");
      if (link) window.location.assign(link.href);
    } else if (key === "u") {
      var undo = document.querySelector("#flash form[action*='/undo'] button");
      if (undo) undo.click();
      else return;
    } else return;
    event.preventDefault();
  });
})();
