import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Stream;
import javax.xml.parsers.DocumentBuilderFactory;
import org.w3c.dom.Element;
import org.w3c.dom.NodeList;

/**
 * CI's guard against silent skips: reads every module's surefire XML reports
 * ({@code MODULE/target/surefire-reports/TEST-*.xml}) after {@code mvn -B verify} and exits 1
 * when a test was skipped that {@code .ci/allowed-skips} does not name (one
 * {@code Class#method} or {@code Class} per line, {@code #} comments), or when a module with
 * tests left no report. Run from the repository root: {@code java .ci/CheckSkips.java}.
 */
public class CheckSkips {
  public static void main(String[] args) throws Exception {
    Path root = Path.of(args.length > 0 ? args[0] : ".");
    Set<String> allowed = new TreeSet<>();
    Path allowFile = root.resolve(".ci/allowed-skips");
    if (Files.exists(allowFile)) {
      for (String line : Files.readAllLines(allowFile)) {
        // a comment starts a line or follows a space; "Class#method" names a method
        String l = line.replaceAll("(^|\\s)#.*", "").trim();
        if (!l.isEmpty()) {
          allowed.add(l);
        }
      }
    }
    List<String> problems = new ArrayList<>();
    int tests = 0;
    int skippedAllowed = 0;
    List<Path> modules;
    try (Stream<Path> s = Files.list(root)) {
      modules = s.filter(m -> Files.isDirectory(m.resolve("src/test/java"))).sorted().toList();
    }
    for (Path module : modules) {
      Path reports = module.resolve("target/surefire-reports");
      List<Path> xmls = List.of();
      if (Files.isDirectory(reports)) {
        try (Stream<Path> s = Files.list(reports)) {
          xmls = s.filter(p -> p.getFileName().toString().matches("TEST-.*\\.xml")).sorted()
              .toList();
        }
      }
      if (xmls.isEmpty()) {
        problems.add(module.getFileName() + ": has tests but no surefire report (tests not run?)");
        continue;
      }
      for (Path xml : xmls) {
        NodeList cases = DocumentBuilderFactory.newInstance().newDocumentBuilder()
            .parse(xml.toFile()).getElementsByTagName("testcase");
        for (int i = 0; i < cases.getLength(); i++) {
          Element c = (Element) cases.item(i);
          tests++;
          NodeList skipped = c.getElementsByTagName("skipped");
          if (skipped.getLength() == 0) {
            continue;
          }
          String cls = c.getAttribute("classname");
          String simple = cls.substring(cls.lastIndexOf('.') + 1);
          String name = simple + "#" + c.getAttribute("name").replaceAll("\\(.*", "");
          if (allowed.contains(name) || allowed.contains(simple)) {
            skippedAllowed++;
            continue;
          }
          String why = ((Element) skipped.item(0)).getAttribute("message");
          problems.add(module.getFileName() + ": skipped " + name
              + (why.isEmpty() ? "" : " (" + why + ")"));
        }
      }
    }
    System.out.printf("check-skips: %d tests in %d modules, %d allowed skips%n", tests,
        modules.size(), skippedAllowed);
    if (!problems.isEmpty()) {
      System.err.println("check-skips: FAILED, tests CI claims to run did not run:");
      problems.forEach(p -> System.err.println("  " + p));
      System.err.println("(fix the cause, or name the test in .ci/allowed-skips with a reason)");
      System.exit(1);
    }
  }
}
