package dev.lms4j.viz;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.lms4j.core.graph.DataflowGraph;
import dev.lms4j.core.graph.Op;
import dev.lms4j.core.graph.Tensor;
import dev.lms4j.core.plan.RecomputeApplier;
import dev.lms4j.core.plan.RecomputePlan;
import dev.lms4j.core.plan.SwapPlan;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.stream.Collectors;

/**
 * One self-contained HTML page about a plan: the numbers of the {@code lms4j-report/1} report,
 * the memory plot and the distance histograms as inline SVG, and the plan (which tensors are
 * swapped or recomputed, their sizes, triggers and consumers) in a table sorted by clicking a
 * column heading. Nothing is loaded from the network: CSS, script and plots are in the page.
 *
 * <p>The page opens sorted when its address ends in {@code #sort=KEY:asc} or
 * {@code #sort=KEY:desc} ({@code KEY} is a column's {@code data-key}: {@code action},
 * {@code tensor}, {@code type}, {@code shape}, {@code bytes}, {@code swapins}, {@code triggers},
 * {@code consumers}); the script does it by clicking the heading, as a person would.
 *
 * <pre>{@code
 * String html = HtmlReport.render(report.json(), result.model(), result.plan(),
 *     result.recompute(), MemoryChart.Marks.of("resnet", budget).memRatio(0.8));
 * HtmlReport.write(html, Path.of("plan.html"));
 * }</pre>
 */
public final class HtmlReport {
  private static final ObjectMapper JSON = new ObjectMapper();

  static {
    ChartFiles.headless();
  }

  private HtmlReport() {}

  /**
   * Checks that a page can be written to {@code file} (ends in {@code .html} or {@code .htm},
   * its directory exists).
   *
   * @throws IllegalArgumentException naming the problem
   */
  public static void checkTarget(Path file) {
    String name = file.getFileName() == null ? "" : file.getFileName().toString()
        .toLowerCase(Locale.ROOT);
    if (!name.endsWith(".html") && !name.endsWith(".htm")) {
      throw new IllegalArgumentException("cannot write the page to " + file + ": the file name "
          + "must end in .html");
    }
    ChartFiles.checkWritable(file);
  }

  /** Writes a rendered page atomically. */
  public static void write(String html, Path file) throws IOException {
    checkTarget(file);
    ChartFiles.writeAtomically(file, html.getBytes(StandardCharsets.UTF_8));
  }

  /**
   * Renders the page.
   *
   * @param report    the report (schema {@code lms4j-report/1})
   * @param model     the graph model of the original graph, or null (no plots, table without
   *                  types and shapes)
   * @param swap      the swap plan, or null
   * @param recompute the recompute plan, or null
   * @param marks     budget, planner ratio and measured peak for the memory plot
   */
  public static String render(ObjectNode report, DataflowGraph model, SwapPlan swap,
      RecomputePlan recompute, MemoryChart.Marks marks) throws IOException {
    return render(report, model, model, swap, recompute, marks);
  }

  /**
   * Renders the page for plans made on a graph an earlier step had changed (see {@link
   * MemoryTimeline#of(DataflowGraph, DataflowGraph, SwapPlan, RecomputePlan)}): the plots
   * before LMS show {@code original}.
   */
  public static String render(ObjectNode report, DataflowGraph original, DataflowGraph model,
      SwapPlan swap, RecomputePlan recompute, MemoryChart.Marks marks) throws IOException {
    String name = report.path("model").asText("model");
    StringBuilder h = new StringBuilder(1 << 16);
    h.append("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n")
        .append("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n")
        .append("<title>lms4j report: ").append(esc(name)).append("</title>\n<style>\n")
        .append(CSS).append("</style>\n</head>\n<body>\n<main>\n");
    header(h, report);
    cards(h, report);
    String error = report.path("error").isTextual() ? report.get("error").asText() : null;
    if (error != null) {
      h.append("<p class=\"error\" id=\"error\"><strong>Error:</strong> ").append(esc(error))
          .append("</p>\n");
    }
    if (model != null) {
      MemoryTimeline t = MemoryTimeline.of(original, model, swap, recompute);
      h.append("<section id=\"memory\">\n<h2>Memory over one step</h2>\n<p class=\"note\">")
          .append("Simulated device memory while each op of the levelled schedule runs (the "
              + "order the planner assumes), before and after the rewrite. Markers show where "
              + "swap-outs, swap-ins and recomputed ops run. The simulator does not see kernel "
              + "scratch memory or fragmentation: that is what the gap between the planner "
              + "target and the budget is for.</p>\n")
          .append(ChartFiles.inlineSvg(MemoryChart.chart(t, marks), "m-"))
          .append("\n</section>\n");
      boolean planned = t.rewritten();
      h.append("<section id=\"distances\">\n<h2>Producer-consumer distances</h2>\n")
          .append("<p class=\"note\">Data edges by the number of levels between producer and "
              + "consumer (TFLMS's distance). Swapping pays off for tensors read far from where "
              + "they are made. ")
          .append(planned ? "Left: the original graph. Right: the graph the swap planner saw "
              + "(recomputed ops cloned next to their readers), with the edges read through "
              + "swap-ins and the edges read from recomputed ops." : "")
          .append("</p>\n<div class=\"pair\">")
          .append(ChartFiles.inlineSvg(DistanceChart.chart(
              DistanceChart.histogram(original, null, null), false, planned ? "original" : null),
              "d-"));
      if (planned) {
        h.append(ChartFiles.inlineSvg(DistanceChart.chart(
            DistanceChart.histogram(model, swap, recompute), false, "as planned"), "p-"));
      }
      h.append("</div>\n</section>\n");
    }
    planTable(h, model, swap, recompute);
    numbers(h, report);
    h.append("<footer>Written by lms4j; report schema ")
        .append(esc(report.path("schema").asText())).append(".</footer>\n</main>\n<script>\n")
        .append(JS).append("</script>\n</body>\n</html>\n");
    return h.toString();
  }

  private static void header(StringBuilder h, ObjectNode r) {
    h.append("<header>\n<h1>lms4j report: ").append(esc(r.path("model").asText()))
        .append("</h1>\n<p class=\"sub\">batch ").append(esc(r.path("batch").asText()))
        .append(" &middot; budget ").append(r.path("budget_bytes").isNumber()
            ? esc(size(r.get("budget_bytes").asLong())) : "none")
        .append(" &middot; LMS mode <code>").append(esc(r.path("lms").asText())).append("</code>");
    JsonNode planner = r.path("plan").path("parameters").path("planner");
    if (planner.isTextual()) {
      h.append(" &middot; planner <code>").append(esc(planner.asText())).append("</code>");
    }
    h.append("</p>\n</header>\n");
  }

  private static void cards(StringBuilder h, ObjectNode r) {
    h.append("<section class=\"cards\" id=\"summary\">\n");
    JsonNode pp = r.path("predicted_peak_bytes");
    card(h, "predicted peak before", pp.path("before"), true);
    card(h, "predicted peak after", pp.path("after"), true);
    card(h, "budget", r.path("budget_bytes"), true);
    JsonNode m = r.path("measured");
    if (m.isObject()) {
      card(h, "measured peak", m.path("peak_bytes"), true);
      card(h, "ms per step (median)", m.path("ms_per_step_median"), false);
    }
    JsonNode p = r.path("plan");
    card(h, "swap-outs / swap-ins", p.path("swap_outs").isNumber()
        ? JSON.getNodeFactory().textNode(p.get("swap_outs").asText() + " / "
            + p.path("swap_ins").asText()) : p.path("swap_outs"), false);
    card(h, "swapped", p.path("swapped_bytes"), true);
    card(h, "recomputed ops", p.path("recomputed_ops"), false);
    card(h, "recomputed", p.path("recomputed_bytes"), true);
    card(h, "planning", p.path("planning_ms").isNumber()
        ? JSON.getNodeFactory().textNode(p.get("planning_ms").asText() + " ms")
        : p.path("planning_ms"), false);
    h.append("</section>\n");
  }

  private static void card(StringBuilder h, String label, JsonNode v, boolean bytes) {
    String text = v.isMissingNode() || v.isNull() ? "&ndash;"
        : bytes && v.isNumber() ? esc(size(v.asLong()))
        : v.isFloatingPointNumber() ? esc(String.format(Locale.ROOT, "%.1f", v.asDouble()))
        : esc(v.asText());
    h.append("<div class=\"card\"><div class=\"v\">").append(text)
        .append("</div><div class=\"k\">").append(esc(label)).append("</div></div>\n");
  }

  /** One row of the plan table. */
  private record Row(String kind, String action, String tensor, String type, String shape,
      long bytes, int swapIns, List<List<String>> triggers, List<List<String>> consumers) {}

  private static void planTable(StringBuilder h, DataflowGraph model, SwapPlan swap,
      RecomputePlan recompute) {
    List<Row> rows = new ArrayList<>();
    // swap plans name ops of the graph the swap planner saw (recomputed ops cloned)
    DataflowGraph seen = model == null || recompute == null || recompute.isEmpty() ? model
        : RecomputeApplier.apply(model, recompute);
    if (swap != null) {
      for (SwapPlan.SwapOut so : swap.swapOuts()) {
        Optional<Op> op = seen == null ? Optional.empty() : seen.op(so.producer());
        Tensor t = op.map(o -> o.output(so.output())).orElse(null);
        List<List<String>> trig = new ArrayList<>();
        List<List<String>> cons = new ArrayList<>();
        for (SwapPlan.SwapIn si : so.swapIns()) {
          trig.add(si.triggers());
          cons.add(si.consumers());
        }
        rows.add(new Row("swap", "swap", so.tensorName(), op.map(Op::type).orElse(""),
            t == null ? so.dtype() : shape(t), so.bytes(), so.swapIns().size(), trig, cons));
      }
    }
    if (recompute != null) {
      for (RecomputePlan.Group g : recompute.groups()) {
        for (String name : g.ops()) {
          Optional<Op> op = model == null ? Optional.empty() : model.op(name);
          List<String> consumers = g.repoints().stream().filter(r -> r.op().equals(name))
              .map(RecomputePlan.Repoint::consumer).distinct().toList();
          rows.add(new Row("recompute", "recompute (" + g.name() + ")", name,
              op.map(Op::type).orElse(""),
              op.filter(o -> !o.outputs().isEmpty()).map(o -> shape(o.output(0))).orElse(""),
              op.map(Op::transientOutputBytes).orElse(0L), -1, List.of(g.triggers()),
              consumers.isEmpty() ? List.of() : List.of(consumers)));
        }
      }
    }
    h.append("<section id=\"plan-section\">\n<h2>The plan</h2>\n");
    if (rows.isEmpty()) {
      h.append("<p>Nothing is swapped or recomputed.</p>\n");
    }
    h.append("<p class=\"note\">").append(rows.size()).append(rows.size() == 1 ? " row" : " rows")
        .append(": one per swapped tensor (for each of its swap-ins, one line with the ops it "
            + "waits for and one with the consumers re-pointed to read it) and one per "
            + "recomputed op (its group's triggers and the backward ops that read the clone). "
            + "Click a column heading to sort.</p>\n")
        .append("<table id=\"plan\" class=\"sortable\">\n<thead><tr>");
    String[][] cols = {{"action", "Action", "text"}, {"tensor", "Tensor / op", "text"},
        {"type", "Op type", "text"}, {"shape", "Shape", "text"}, {"bytes", "Size", "num"},
        {"swapins", "Swap-ins", "num"}, {"triggers", "Triggers", "text"},
        {"consumers", "Consumers", "text"}};
    for (String[] c : cols) {
      h.append("<th data-key=\"").append(c[0]).append("\" data-type=\"").append(c[2])
          .append("\" tabindex=\"0\">").append(c[1]).append("</th>");
    }
    h.append("</tr></thead>\n<tbody>\n");
    for (int i = 0; i < rows.size(); i++) {
      Row r = rows.get(i);
      h.append("<tr data-index=\"").append(i).append("\" data-bytes=\"").append(r.bytes())
          .append("\" class=\"").append(r.kind()).append("\">")
          .append("<td>").append(esc(r.action())).append("</td>")
          .append("<td data-sort=\"").append(esc(r.tensor())).append("\">")
          .append(name(r.tensor())).append("</td>")
          .append("<td>").append(esc(r.type())).append("</td>")
          .append("<td class=\"shape\">").append(esc(r.shape())).append("</td>")
          .append("<td class=\"num\" data-sort=\"").append(r.bytes()).append("\">")
          .append(esc(size(r.bytes()))).append("</td>")
          .append("<td class=\"num\" data-sort=\"").append(Math.max(0, r.swapIns()))
          .append("\">").append(r.swapIns() < 0 ? "&ndash;" : Integer.toString(r.swapIns()))
          .append("</td>");
      lists(h, r.triggers());
      lists(h, r.consumers());
      h.append("</tr>\n");
    }
    h.append("</tbody>\n</table>\n</section>\n");
  }

  /** A cell with one line per list (per swap-in); long lists show their first names. */
  private static void lists(StringBuilder h, List<List<String>> lists) {
    h.append("<td data-sort=\"").append(esc(lists.stream().map(l -> String.join(" ", l))
        .collect(Collectors.joining(" ")))).append("\">");
    if (lists.isEmpty() || lists.stream().allMatch(List::isEmpty)) {
      h.append("&ndash;");
    }
    for (List<String> l : lists) {
      h.append("<div class=\"li\">");
      int shown = l.size() > 4 ? 3 : l.size();
      for (int i = 0; i < shown; i++) {
        h.append(i > 0 ? ", " : "").append(name(l.get(i)));
      }
      if (shown < l.size()) {
        h.append(" <details><summary>").append(l.size() - shown).append(" more</summary>");
        for (int i = shown; i < l.size(); i++) {
          h.append(i > shown ? ", " : "").append(name(l.get(i)));
        }
        h.append("</details>");
      }
      h.append("</div>");
    }
    h.append("</td>");
  }

  /** An op or tensor name that may break after its slashes. */
  private static String name(String n) {
    return esc(n).replace("/", "/<wbr>");
  }

  private static void numbers(StringBuilder h, ObjectNode r) throws IOException {
    h.append("<section id=\"numbers\">\n<h2>Report numbers</h2>\n<table class=\"kv\">\n")
        .append("<thead><tr><th>field</th><th>value</th></tr></thead>\n<tbody>\n");
    flatten(h, "", r);
    h.append("</tbody>\n</table>\n<details><summary>The report as JSON (")
        .append(esc(r.path("schema").asText())).append(")</summary>\n<pre id=\"report-json\">")
        .append(esc(JSON.writerWithDefaultPrettyPrinter().writeValueAsString(r)))
        .append("</pre>\n</details>\n</section>\n");
  }

  private static void flatten(StringBuilder h, String prefix, JsonNode n) {
    if (n.isObject()) {
      Iterator<Map.Entry<String, JsonNode>> it = n.fields();
      while (it.hasNext()) {
        Map.Entry<String, JsonNode> e = it.next();
        flatten(h, prefix.isEmpty() ? e.getKey() : prefix + "." + e.getKey(), e.getValue());
      }
      return;
    }
    String value;
    if (n.isArray()) {
      boolean scalars = true;
      for (JsonNode x : n) {
        scalars &= x.isValueNode();
      }
      if (!scalars) {
        value = n.size() + " entries (in the JSON below)";
      } else {
        List<String> parts = new ArrayList<>();
        n.forEach(x -> parts.add(x.asText()));
        value = "[" + String.join(", ", parts) + "]";
      }
    } else if (n.isNull()) {
      value = "null";
    } else {
      value = n.asText();
      boolean bytes = prefix.endsWith("bytes") || prefix.startsWith("predicted_peak_bytes.");
      if (bytes && n.isIntegralNumber()) {
        value += " (" + size(n.asLong()) + ")";
      }
    }
    h.append("<tr><td><code>").append(esc(prefix)).append("</code></td><td>").append(esc(value))
        .append("</td></tr>\n");
  }

  private static String shape(Tensor t) {
    return t.dtype() + Arrays.toString(t.shape());
  }

  /** A size for people: bytes, KiB or MiB. */
  static String size(long b) {
    if (b < 1024) {
      return b + " B";
    }
    if (b < 1 << 20) {
      return String.format(Locale.ROOT, "%.1f KiB", b / 1024.0);
    }
    return String.format(Locale.ROOT, "%.1f MiB", b / 1048576.0);
  }

  /** Escapes text for HTML element content and quoted attributes. */
  static String esc(String s) {
    StringBuilder b = new StringBuilder(s.length());
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      switch (c) {
        case '&' -> b.append("&amp;");
        case '<' -> b.append("&lt;");
        case '>' -> b.append("&gt;");
        case '"' -> b.append("&quot;");
        case '\'' -> b.append("&#39;");
        default -> b.append(c);
      }
    }
    return b.toString();
  }

  private static final String CSS = """
      :root { --fg:#1d232b; --muted:#5b6570; --line:#d9dee4; --accent:#1f77b4; }
      * { box-sizing: border-box; }
      body { margin:0; font-family: "DejaVu Sans", "Helvetica Neue", Arial, sans-serif;
        color:var(--fg); background:#f5f7f9; font-size:14px; line-height:1.45; }
      main { max-width:1320px; margin:0 auto; padding:20px 28px 40px; }
      header h1 { margin:0 0 4px; font-size:24px; }
      .sub { margin:0 0 18px; color:var(--muted); }
      code { font-family:"DejaVu Sans Mono", monospace; font-size:12.5px; }
      section { background:#fff; border:1px solid var(--line); border-radius:6px;
        padding:14px 18px; margin:0 0 18px; }
      section.cards { display:grid; grid-template-columns:repeat(auto-fill, minmax(170px, 1fr));
        gap:10px; background:none; border:none; padding:0; }
      .card { background:#fff; border:1px solid var(--line); border-radius:6px; padding:10px 12px; }
      .card .v { font-size:20px; font-weight:bold; }
      .card .k { color:var(--muted); font-size:12px; }
      h2 { font-size:17px; margin:2px 0 6px; }
      .note { color:var(--muted); margin:0 0 10px; max-width:1100px; }
      .error { background:#fdecea; border:1px solid #f5c2bd; color:#8a1c13; padding:10px 14px;
        border-radius:6px; }
      svg.chart { display:block; width:100%; max-width:1200px; height:auto; }
      .pair { display:grid; grid-template-columns:repeat(auto-fit, minmax(480px, 1fr)); gap:12px; }
      .pair svg.chart { max-width:700px; }
      table { border-collapse:collapse; width:100%; }
      th, td { text-align:left; padding:5px 8px; border-bottom:1px solid var(--line);
        vertical-align:top; }
      #plan td { font-family:"DejaVu Sans Mono", monospace; font-size:12px;
        overflow-wrap:anywhere; }
      #plan td:first-child { font-family:inherit; white-space:nowrap; }
      #plan .li + .li { border-top:1px dotted var(--line); margin-top:2px; padding-top:2px; }
      #plan details { display:inline; }
      #plan summary { display:inline; cursor:pointer; color:var(--accent);
        font-family:"DejaVu Sans", sans-serif; }
      td.num, td.shape { white-space:nowrap; }
      td.num { text-align:right; }
      thead th { background:#eef1f4; position:sticky; top:0; }
      table.sortable th { cursor:pointer; user-select:none; white-space:nowrap; }
      table.sortable th::after { content:" \\2195"; color:#9aa3ad; }
      table.sortable th[aria-sort=ascending]::after { content:" \\25B2"; color:var(--accent); }
      table.sortable th[aria-sort=descending]::after { content:" \\25BC"; color:var(--accent); }
      tr.swap td:first-child { border-left:4px solid #9467bd; }
      tr.recompute td:first-child { border-left:4px solid #8c564b; }
      table.kv td:first-child { width:40%; }
      pre { background:#f3f5f7; padding:10px; overflow:auto; max-height:420px; font-size:12px; }
      footer { color:var(--muted); font-size:12px; }
      """;

  private static final String JS = """
      (function () {
        'use strict';
        function value(row, i, num) {
          var c = row.cells[i];
          var v = c.getAttribute('data-sort');
          if (v === null) { v = c.textContent.trim(); }
          return num ? parseFloat(v) : v.toLowerCase();
        }
        function sortBy(table, th, dir) {
          var i = th.cellIndex;
          var num = th.getAttribute('data-type') === 'num';
          var body = table.tBodies[0];
          var rows = Array.prototype.slice.call(body.rows);
          rows.sort(function (a, b) {
            var x = value(a, i, num), y = value(b, i, num);
            var r = num ? x - y : (x < y ? -1 : x > y ? 1 : 0);
            if (dir === 'descending') { r = -r; }
            if (r === 0) { r = a.getAttribute('data-index') - b.getAttribute('data-index'); }
            return r;
          });
          rows.forEach(function (r) { body.appendChild(r); });
          Array.prototype.forEach.call(th.parentNode.cells, function (c) {
            c.removeAttribute('aria-sort');
          });
          th.setAttribute('aria-sort', dir);
          table.setAttribute('data-sorted', th.getAttribute('data-key') + ':' + dir);
        }
        function next(th) {
          var cur = th.getAttribute('aria-sort');
          if (cur === 'ascending') { return 'descending'; }
          if (cur === 'descending') { return 'ascending'; }
          return th.getAttribute('data-type') === 'num' ? 'descending' : 'ascending';
        }
        Array.prototype.forEach.call(document.querySelectorAll('table.sortable'), function (t) {
          Array.prototype.forEach.call(t.tHead.rows[0].cells, function (th) {
            th.addEventListener('click', function () { sortBy(t, th, next(th)); });
            th.addEventListener('keydown', function (e) {
              if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); th.click(); }
            });
          });
        });
        // #sort=KEY:asc|desc opens the page sorted, by clicking the heading as a person would
        var m = /^#sort=([a-z]+):(asc|desc)$/.exec(location.hash);
        if (m) {
          var th = document.querySelector('#plan th[data-key="' + m[1] + '"]');
          var want = m[2] === 'asc' ? 'ascending' : 'descending';
          for (var k = 0; th && k < 2 && th.getAttribute('aria-sort') !== want; k++) { th.click(); }
        }
      })();
      """;
}
