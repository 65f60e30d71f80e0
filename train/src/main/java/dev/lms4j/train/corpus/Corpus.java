package dev.lms4j.train.corpus;

import dev.lms4j.tf.TrainingGraph;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;

/**
 * A corpus of training graphs built the ways TF Java 1.1 users build them in graph mode, none of
 * them from lms4j's zoo: resource and ref variables; plain SGD, momentum, and the
 * {@code tensorflow-framework} optimizers (Adam, RMSProp, Momentum) used as a user would;
 * statically unrolled RNNs whose shared weights sum many partial gradients in one {@code AddN};
 * embeddings with dense and sparse updates; DenseNet-style concats; U-Nets with transposed
 * convolutions and skip concats; an attention stack; a graph whose initialisation needs more
 * memory than a training step.
 *
 * <pre>{@code
 * TrainingGraph tg = Corpus.getOrThrow("lstm").build(Corpus.Size.SMALL, 42);
 * }</pre>
 *
 * <p>Every graph is seeded (the same family, size and seed give an identical GraphDef), feeds
 * synthetic data through its manifest (ids through fill {@code ids}), and names {@code loss:0},
 * {@code train_op} and {@code init}.
 */
public final class Corpus {
  private Corpus() {}

  /** How large a family's graph is. */
  public enum Size {
    /** Steps of a few ms to tens of ms: for tests. */
    SMALL,
    /**
     * Peaks of a few tens of MiB, steps well under a second: for tests under a real budget
     * (lstm, gru, encoder and unet have this size; the other families build their small size).
     */
    TEST,
    /** Peaks of tens to a few hundred MiB: for the benchmark. */
    BENCH
  }

  /** The families. */
  public enum Family {
    /** ResNet-style CNN with batch norm on resource variables, {@code ResourceApplyMomentum}. */
    RESNET_RESOURCE("resnet-resource", "ResNet-style CNN, FusedBatchNormV3, resource variables "
        + "(VarHandleOp, ReadVariableOp, AssignVariableOp), ResourceApplyMomentum"),
    /** The same CNN on ref variables with plain SGD. */
    RESNET_REF("resnet-ref", "ResNet-style CNN, FusedBatchNormV3, ref variables (VariableV2), "
        + "ApplyGradientDescent"),
    /** Two-layer LSTM unrolled over time, resource variables read once, SGD. */
    LSTM("lstm", "2-layer LSTM statically unrolled; each shared weight sums one partial "
        + "gradient per step in an n-input AddN; resource variables, "
        + "ResourceApplyGradientDescent"),
    /** GRU unrolled over time, trained with the framework's RMSProp. */
    GRU("gru", "GRU statically unrolled, ref variables, tensorflow-framework RMSProp"),
    /** BERT-style encoder with token embeddings, trained with the framework's Adam. */
    ENCODER("encoder", "transformer encoder (token GatherV2, attention, tanh-GELU, softmax over "
        + "the vocabulary), tensorflow-framework Adam"),
    /** Embedding table updated densely. */
    EMBEDDING_DENSE("embedding-dense", "embedding table + MLP; GatherV2 whose gradient is a "
        + "dense UnsortedSegmentSum over the whole table; ApplyGradientDescent"),
    /** Embedding table updated sparsely with {@code ScatterSub}. */
    EMBEDDING_SPARSE("embedding-sparse", "embedding table + MLP; GatherV2 forward, sparse "
        + "update ScatterSub of the gathered rows' gradient; ref variables"),
    /** Embedding on resource variables: {@code ResourceGather} + {@code ResourceScatterSub}. */
    EMBEDDING_RESOURCE("embedding-resource", "embedding table + MLP on resource variables; "
        + "ResourceGather, ResourceScatterSub, ResourceApplyMomentum"),
    /** DenseNet-style blocks of concats, trained with the framework's Momentum. */
    DENSENET("densenet", "DenseNet-style CNN (dense blocks of concats), ref variables, "
        + "tensorflow-framework Momentum"),
    /** 2D U-Net with transposed convolutions and skip concats. */
    UNET("unet", "2D U-Net: max-pool down, transposed-conv (Conv2DBackpropInput) up, skip "
        + "concats, MSE loss; ApplyGradientDescent"),
    /** MobileNetV2-style inverted residual blocks, trained with the framework's RMSProp. */
    MOBILENET("mobilenet", "MobileNetV2-style CNN: 1x1 expansion, 3x3 depthwise convolution "
        + "(DepthwiseConv2dNative), linear 1x1 projection, FusedBatchNormV3 and ReLU6, residual "
        + "adds; ref variables, tensorflow-framework RMSProp with momentum"),
    /** An MLP with dropout in the step and gradients clipped by global norm. */
    MLP_DROPOUT("mlp-dropout", "MLP with dropout after every hidden layer (seeded "
        + "RandomUniform in the step), gradients clipped by global norm (every gradient alive "
        + "until the norm), tensorflow-framework Adam via computeGradients/applyGradients"),
    /** A CNN with the state a full training recipe updates in the step. */
    CNN_RECIPE("cnn-recipe", "ResNet-style CNN with a full training recipe: batch-norm moving "
        + "mean/variance updated in the step (AssignSub), L2 weight decay, a learning rate "
        + "decayed from a global step (AssignAdd), momentum, an exponential moving average of "
        + "the weights after the updates; ref variables"),
    /** An MLP trained in mixed precision (float16 activations, float32 master weights). */
    MLP_MIXED("mlp-mixed", "MLP in mixed precision: float32 master weights cast to float16 "
        + "per layer, float16 activations and gradients, float32 softmax, a static loss scale; "
        + "momentum on ref variables"),
    /** A transformer encoder written with einsum, as Keras' MultiHeadAttention writes it. */
    ENCODER_EINSUM("encoder-einsum", "transformer encoder written with einsum as Keras' "
        + "MultiHeadAttention writes it (projections abc,cde->abde, scores aecd,abcd->acbe, "
        + "context acbe,aecd->abcd), tanh-GELU, softmax over the vocabulary, "
        + "tensorflow-framework Adam"),
    /** A sparse embedding model whose initialiser needs more memory than a step. */
    INIT_HEAVY("init-heavy", "sparse embedding model whose table's initialiser holds three "
        + "table-sized temporaries: initialisation needs more memory than a training step");

    private final String label;
    private final String description;

    Family(String label, String description) {
      this.label = label;
      this.description = description;
    }

    /** The family's name, e.g. {@code resnet-resource}. */
    public String label() {
      return label;
    }

    /** One line on what the family holds. */
    public String description() {
      return description;
    }

    /**
     * Builds the family's training graph.
     *
     * @param size how large
     * @param seed seed of the initialisers
     * @return the GraphDef and its manifest
     */
    public TrainingGraph build(Size size, long seed) {
      boolean small = size != Size.BENCH;
      if (size == Size.TEST) {
        switch (this) {
          case LSTM:
            return SequenceFamilies.lstm(8, 24, 32, 128, seed);
          case GRU:
            return SequenceFamilies.gru(8, 20, 32, 128, seed);
          case ENCODER:
            return SequenceFamilies.encoder(4, 64, 64, 2, 2, 2000, seed);
          case UNET:
            return ConvFamilies.unet(2, 48, 8, 3, seed);
          default:
            break;
        }
      }
      return switch (this) {
        case RESNET_RESOURCE -> ConvFamilies.resnet(Net.Vars.RESOURCE, Net.Update.MOMENTUM,
            small, seed);
        case RESNET_REF -> ConvFamilies.resnet(Net.Vars.REF, Net.Update.SGD, small, seed);
        case DENSENET -> ConvFamilies.densenet(small, seed);
        case UNET -> ConvFamilies.unet(small, seed);
        case LSTM -> SequenceFamilies.lstm(small, seed);
        case GRU -> SequenceFamilies.gru(small, seed);
        case ENCODER -> SequenceFamilies.encoder(small, seed);
        case EMBEDDING_DENSE -> EmbeddingFamilies.embedding(EmbeddingFamilies.Kind.DENSE, small,
            seed);
        case EMBEDDING_SPARSE -> EmbeddingFamilies.embedding(EmbeddingFamilies.Kind.SPARSE,
            small, seed);
        case EMBEDDING_RESOURCE -> EmbeddingFamilies.embedding(EmbeddingFamilies.Kind.RESOURCE,
            small, seed);
        case MOBILENET -> ConvFamilies.mobilenet(small, seed);
        case MLP_DROPOUT -> RegularizedFamilies.mlpDropout(small, seed);
        case CNN_RECIPE -> RegularizedFamilies.cnnRecipe(small, seed);
        case MLP_MIXED -> RegularizedFamilies.mlpMixed(small, seed);
        case ENCODER_EINSUM -> SequenceFamilies.encoderEinsum(small, seed);
        case INIT_HEAVY -> EmbeddingFamilies.embedding(EmbeddingFamilies.Kind.INIT_HEAVY, small,
            seed);
      };
    }
  }

  /** Every family, in declaration order. */
  public static List<Family> families() {
    return List.of(Family.values());
  }

  /**
   * The family with this name.
   *
   * @throws IllegalArgumentException naming the known families when there is none
   */
  public static Family getOrThrow(String name) {
    for (Family f : Family.values()) {
      if (f.label.equals(name.toLowerCase(Locale.ROOT))) {
        return f;
      }
    }
    throw new IllegalArgumentException("unknown corpus family '" + name + "' (expected one of "
        + Arrays.stream(Family.values()).map(Family::label).toList() + ")");
  }
}
