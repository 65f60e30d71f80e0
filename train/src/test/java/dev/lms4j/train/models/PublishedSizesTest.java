package dev.lms4j.train.models;

import static org.assertj.core.api.Assertions.assertThat;

import dev.lms4j.tf.TrainingGraph;
import java.util.Map;
import org.assertj.core.data.Percentage;
import org.junit.jupiter.api.Test;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.tensorflow.Graph;
import org.tensorflow.GraphOperation;
import org.tensorflow.ndarray.Shape;
import org.tensorflow.proto.GraphDef;
import org.tensorflow.proto.NodeDef;

/**
 * The zoo's published architectures at their standard sizes (batch 1, graphs built, never run):
 * trainable parameters (the sum of the sizes of all variables except optimizer slots) and
 * forward multiply-accumulates.
 *
 * <p>MACs, not FLOPs: one multiply-accumulate is two floating-point operations. The count takes
 * every forward {@code Conv2D}, {@code Conv3D}, {@code MatMul} and {@code BatchMatMulV3}
 * (output elements times the reduced dimension); additions of biases, normalisation,
 * activations and pooling are left out, as in the published figures (torchvision's "GFLOPS"
 * column counts MACs of convolutions and linear layers the same way).
 */
class PublishedSizesTest {

  private static final Logger LOG = LoggerFactory.getLogger(PublishedSizesTest.class);

  private static final Map<String, String> IMAGENET = Map.of("image", "224", "width", "64",
      "classes", "1000");

  @Test
  void resnet50() {
    // torchvision resnet50: 25,557,032 parameters, 4.09 GMACs at 224 x 224
    Sizes s = sizes("resnet50", IMAGENET);
    assertThat(s.parameters).isEqualTo(25_557_032L);
    assertThat((double) s.macs).isCloseTo(4.09e9, Percentage.withPercentage(1));
  }

  @Test
  void resnet18() {
    // torchvision resnet18: 11,689,512 parameters, 1.81 GMACs
    Sizes s = sizes("resnet18", IMAGENET);
    assertThat(s.parameters).isEqualTo(11_689_512L);
    assertThat((double) s.macs).isCloseTo(1.81e9, Percentage.withPercentage(1));
  }

  @Test
  void resnet101() {
    // torchvision resnet101: 44,549,160 parameters, 7.80 GMACs
    Sizes s = sizes("resnet101", IMAGENET);
    assertThat(s.parameters).isEqualTo(44_549_160L);
    assertThat((double) s.macs).isCloseTo(7.80e9, Percentage.withPercentage(1));
  }

  @Test
  void vgg16() {
    // torchvision vgg16: 138,357,544 parameters, 15.47 GMACs
    Sizes s = sizes("vgg16", Map.of("image", "224", "width", "64", "fc", "4096",
        "classes", "1000"));
    assertThat(s.parameters).isEqualTo(138_357_544L);
    assertThat((double) s.macs).isCloseTo(15.47e9, Percentage.withPercentage(1));
  }

  @Test
  void gpt2Small() {
    // GPT-2 small (tied embeddings): wte 50257 x 768 = 38,597,376; wpe 1024 x 768 = 786,432;
    // per layer 2 layer norms 4 x 768 = 3,072, c_attn 768 x 2304 + 2304 = 1,771,776,
    // attn c_proj 768 x 768 + 768 = 590,592, mlp c_fc 768 x 3072 + 3072 = 2,362,368,
    // mlp c_proj 3072 x 768 + 768 = 2,360,064: 7,087,872 x 12 = 85,054,464; ln_f 1,536.
    // Total 124,439,808 (the "124M" of the released checkpoint).
    Sizes s = sizes("gpt2", Map.of("layers", "12", "width", "768", "heads", "12",
        "seq", "1024", "vocab", "50257"));
    assertThat(s.parameters).isEqualTo(124_439_808L);
    // forward MACs per 1024-token sequence: per token and layer 12 d^2 (qkv 3 d^2, proj d^2,
    // mlp 8 d^2) + 2 T d (scores and weighted sum over all T positions: the causal mask is
    // applied to a full product), plus d V for the tied output projection:
    // 1024 x (12 x (12 x 768^2 + 2 x 1024 x 768) + 768 x 50257) = 145.79 G. Without the
    // output projection and attention this is 2 x 85M non-embedding parameters x tokens
    // FLOPs, Kaplan et al.'s 2N per token.
    long d = 768;
    long t = 1024;
    long expected = t * (12 * (12 * d * d + 2 * t * d) + d * 50257);
    assertThat(s.macs).isEqualTo(expected);
    assertThat((double) s.macs).isCloseTo(145.79e9, Percentage.withPercentage(0.1));
  }

  @Test
  void unet3dAsInThePaper() {
    // Cicek et al. 2016 state 19,069,955 parameters. From the architecture (3x3x3 convs with
    // bias, 2x2x2 up-convolutions without bias, 1x1x1 output conv, BN without parameters):
    //   analysis:  27x3x32+32 = 2,624; 27x32x64+64 = 55,360; 27x64x64+64 = 110,656;
    //              27x64x128+128 = 221,312; 27x128x128+128 = 442,496;
    //              27x128x256+256 = 884,992; 27x256x256+256 = 1,769,728;
    //              27x256x512+512 = 3,539,456
    //   synthesis: up 8x512x512 = 2,097,152; 27x768x256+256 = 5,308,672; 1,769,728;
    //              up 8x256x256 = 524,288; 27x384x128+128 = 1,327,232; 442,496;
    //              up 8x128x128 = 131,072; 27x192x64+64 = 331,840; 110,656
    //   output:    64x3+3 = 195
    //   sum 19,069,955 (with biases on the up-convolutions it would be 896 more).
    Sizes s = sizes("unet3d", Map.of("side", "132", "depth", "116", "width", "32",
        "padding", "valid", "classes", "3", "channels", "3"));
    assertThat(s.parameters).isEqualTo(19_069_955L);
    // forward MACs, valid convolutions on 116 x 132 x 132 (depth x height x width), output
    // 28 x 44 x 44: the sum over layers of output voxels x 27 x cin x cout (up-convolutions:
    // input voxels x cin x 8 cout; output conv: voxels x 64 x 3), computed layer by layer below
    assertThat(s.macs).isEqualTo(unetMacs()).isEqualTo(266_731_018_496L);
  }

  /** The 3D U-Net's forward MACs, walked through the paper's layer sizes. */
  private static long unetMacs() {
    long[] d = {116, 132, 132};
    long macs = 0;
    int[][] analysis = {{3, 32, 64}, {64, 64, 128}, {128, 128, 256}, {256, 256, 512}};
    for (int i = 0; i < analysis.length; i++) {
      shrink(d);
      macs += voxels(d) * 27 * analysis[i][0] * analysis[i][1];
      shrink(d);
      macs += voxels(d) * 27 * analysis[i][1] * analysis[i][2];
      if (i < analysis.length - 1) {
        for (int k = 0; k < 3; k++) {
          d[k] /= 2;
        }
      }
    }
    int[][] synthesis = {{512, 256}, {256, 128}, {128, 64}};
    for (int[] level : synthesis) {
      macs += voxels(d) * level[0] * 8 * level[0];
      for (int k = 0; k < 3; k++) {
        d[k] *= 2;
      }
      shrink(d);
      macs += voxels(d) * 27 * (level[0] + level[1]) * level[1];
      shrink(d);
      macs += voxels(d) * 27 * level[1] * level[1];
    }
    assertThat(d).containsExactly(28, 44, 44);
    return macs + voxels(d) * 64 * 3;
  }

  private static void shrink(long[] d) {
    for (int k = 0; k < 3; k++) {
      d[k] -= 2;
    }
  }

  private static long voxels(long[] d) {
    return d[0] * d[1] * d[2];
  }

  record Sizes(long parameters, long macs) {}

  private static Sizes sizes(String model, Map<String, String> options) {
    TrainingGraph tg = ModelZoo.getOrThrow(model).build(1, options);
    Sizes s = new Sizes(parameters(tg.graphDef()), forwardMacs(tg.graphDef()));
    LOG.info("{} {}: {} parameters, {} forward MACs", model, options, s.parameters, s.macs);
    return s;
  }

  /** Sum of the variables' sizes, optimizer slots (under {@code train/}) left out. */
  static long parameters(GraphDef def) {
    long n = 0;
    for (NodeDef node : def.getNodeList()) {
      if (node.getOp().equals("VariableV2") && !node.getName().startsWith("train/")) {
        n += Shape.of(node.getAttrOrThrow("shape").getShape().getDimList().stream()
            .mapToLong(dim -> dim.getSize()).toArray()).size();
      }
    }
    return n;
  }

  /** Forward MACs of convolutions and matrix products, from the static shapes. */
  static long forwardMacs(GraphDef def) {
    long macs = 0;
    try (Graph g = new Graph()) {
      g.importGraphDef(def);
      for (NodeDef node : def.getNodeList()) {
        if (node.getName().startsWith("gradients/") || node.getName().startsWith("metrics/")) {
          continue;
        }
        switch (node.getOp()) {
          case "Conv2D", "Conv3D" -> {
            Shape out = g.operation(node.getName()).output(0).shape();
            Shape kernel = shapeOf(g, node.getInput(1));
            long reduce = 1;
            for (int i = 0; i < kernel.numDimensions() - 1; i++) {
              reduce *= kernel.get(i);
            }
            macs += out.size() * reduce;
          }
          case "MatMul", "BatchMatMulV3" -> {
            Shape out = g.operation(node.getName()).output(0).shape();
            Shape a = shapeOf(g, node.getInput(0));
            String adj = node.getOp().equals("MatMul") ? "transpose_a" : "adj_x";
            boolean transposed = node.getAttrOrThrow(adj).getB();
            int rank = a.numDimensions();
            macs += out.size() * a.get(transposed ? rank - 2 : rank - 1);
          }
          default -> { }
        }
      }
    }
    return macs;
  }

  private static Shape shapeOf(Graph g, String input) {
    int colon = input.lastIndexOf(':');
    GraphOperation op = g.operation(colon < 0 ? input : input.substring(0, colon));
    return op.output(colon < 0 ? 0 : Integer.parseInt(input.substring(colon + 1))).shape();
  }
}
