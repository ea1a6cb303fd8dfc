// Refreshes the page's main section from the relay, which renders it: no
// data is turned into markup here.
(function () {
  var main = document.getElementById("main");
  var every = parseInt(main.getAttribute("data-refresh-ms"), 10) || 5000;
  function refresh() {
    fetch("/?part=main", { cache: "no-store" })
      .then(function (r) { if (!r.ok) throw new Error(r.status); return r.text(); })
      .then(function (html) { main.innerHTML = html; main.setAttribute("data-refreshed", String(Date.now())); })
      .catch(function () { main.setAttribute("data-stale", "true"); })
      .finally(function () { setTimeout(refresh, every); });
  }
  setTimeout(refresh, every);
  main.setAttribute("data-script", "ran");
})();
