package dev.lms4j.bench;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.lms4j.train.corpus.Corpus;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The corpus benchmark's table: fractions of TensorFlow's minimum, identity marks, failures. */
class CorpusBenchMarkdownTest {

  @Test
  void tableShowsFractionsOfTensorFlowsMinimum() throws Exception {
    ObjectNode root = (ObjectNode) new ObjectMapper().readTree("""
        {"size":"bench","command":"./lms4j bench --suite corpus","machine":"m",
         "wall_seconds":120,"resolution":0.08,"steps_per_probe":2,
         "families":[{"family":"lstm","tf_min_budget_mib":200,"parameter_bytes":1048576,
           "floor_bytes":2097152,"predicted_peak_bytes":3145728,"measured_peak_bytes":4194304,
           "methods":[
            {"method":"none","kind":"tensorflow","min_budget_mib":200},
            {"method":"grappler-recomp","kind":"tensorflow","min_budget_mib":200,
             "losses_identical":true},
            {"method":"grappler-heur","kind":"tensorflow","min_budget_mib":180,
             "losses_identical":true},
            {"method":"grappler-sched","kind":"tensorflow","min_budget_mib":-1,
             "why":"does not train at TensorFlow's own minimum (200 MiB): OOM"},
            {"method":"tflms","kind":"lms4j","min_budget_mib":100,"losses_identical":true,
             "predicted_peak_bytes":52428800,"measured_peak_bytes":62914560},
            {"method":"swap","kind":"lms4j","min_budget_mib":-1,"why":"no budget found"},
            {"method":"remat","kind":"lms4j","min_budget_mib":150,"losses_identical":false,
             "predicted_peak_bytes":104857600,"measured_peak_bytes":115343360},
            {"method":"auto","kind":"lms4j","min_budget_mib":70,"losses_identical":true,
             "predicted_peak_bytes":41943040,"measured_peak_bytes":47185920}]},
          {"family":"unet","error":"the unbudgeted run failed: boom"}]}
        """);
    String md = CorpusBench.markdown(root);
    assertThat(md).contains("| lstm | 200 MiB | 1.00 = | 0.90 = | > 1 (fails at TF min) | "
        + "0.50 = | none | 0.75 != | 0.35 = | 1.0 | 2.0 | 3.0 / 4.0 |");
    assertThat(md).contains("| lstm | 50.0 / 60.0 | - | 100.0 / 110.0 | 40.0 / 45.0 |");
    assertThat(md).contains("| unet | the unbudgeted run failed: boom");
    assertThat(md).contains("- lstm, swap: no budget found");
  }

  @Test
  void recordedCommandRunsWhatWasMeasured() {
    assertThat(CorpusBench.command("bench", Corpus.families(), Corpus.Size.BENCH, 0.08, false,
        true)).isEqualTo("./lms4j bench --suite corpus --resolution 0.08 --serial-order");
    assertThat(CorpusBench.command("mobilenet", List.of(Corpus.Family.MOBILENET),
        Corpus.Size.BENCH, 0.013, false, true)).isEqualTo("./lms4j bench --suite corpus "
        + "--families mobilenet --resolution 0.013 --tag mobilenet --serial-order");
    assertThat(CorpusBench.command("small", List.of(Corpus.Family.LSTM, Corpus.Family.GRU),
        Corpus.Size.SMALL, 0.1, true, false)).isEqualTo("./lms4j bench --suite corpus "
        + "--size small --families lstm,gru --resolution 0.1 --append --no-serial-order");
  }
}
