// Apache Avro's own Java reader (the avro jar inside the pyspark wheel) as an independent
// judge of schema resolution for tests/test_avro_java_judge.py.
//
// Input (stdin), per case: a line with the writer schema (JSON), a line with the reader
// schema, a line of space-separated hex payloads. Output, per payload: one line of JSON,
// the datum as GenericDatumReader(writer, reader) reads it (bytes and fixed as
// {"bytes": hex}), or {"error": message}. A schema pair that cannot resolve gives one
// {"error": ...} line per payload.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.Map;
import org.apache.avro.Schema;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.generic.GenericEnumSymbol;
import org.apache.avro.generic.GenericFixed;
import org.apache.avro.generic.GenericRecord;
import org.apache.avro.io.BinaryDecoder;
import org.apache.avro.io.DecoderFactory;

public class AvroJudge {
  public static void main(String[] args) throws Exception {
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, "UTF-8"));
    String w;
    while ((w = in.readLine()) != null) {
      String r = in.readLine();
      String[] payloads = in.readLine().trim().split(" ");
      for (String hex : payloads) {
        StringBuilder out = new StringBuilder();
        try {
          Schema ws = new Schema.Parser().parse(w);
          Schema rs = new Schema.Parser().parse(r);
          GenericDatumReader<Object> reader = new GenericDatumReader<>(ws, rs);
          BinaryDecoder dec = DecoderFactory.get().binaryDecoder(unhex(hex), null);
          json(reader.read(null, dec), out);
        } catch (Exception e) {
          out.setLength(0);
          out.append("{\"error\": ");
          str(e.getClass().getSimpleName() + ": " + e.getMessage(), out);
          out.append("}");
        }
        System.out.println(out);
      }
    }
  }

  static byte[] unhex(String s) {
    if (s.equals("-")) return new byte[0];
    byte[] b = new byte[s.length() / 2];
    for (int i = 0; i < b.length; i++) b[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
    return b;
  }

  static void json(Object v, StringBuilder out) {
    if (v == null) out.append("null");
    else if (v instanceof Boolean || v instanceof Integer || v instanceof Long) out.append(v);
    else if (v instanceof Float) out.append("{\"float\": \"").append(v).append("\"}");
    else if (v instanceof Double) out.append("{\"double\": \"").append(v).append("\"}");
    else if (v instanceof CharSequence || v instanceof GenericEnumSymbol) str(v.toString(), out);
    else if (v instanceof ByteBuffer) bytes(((ByteBuffer) v).duplicate(), out);
    else if (v instanceof GenericFixed) bytes(ByteBuffer.wrap(((GenericFixed) v).bytes()), out);
    else if (v instanceof GenericRecord) {
      GenericRecord rec = (GenericRecord) v;
      out.append("{");
      boolean first = true;
      for (Schema.Field f : rec.getSchema().getFields()) {
        if (!first) out.append(", ");
        first = false;
        str(f.name(), out);
        out.append(": ");
        json(rec.get(f.pos()), out);
      }
      out.append("}");
    } else if (v instanceof Map) {
      out.append("{\"map\": {");
      boolean first = true;
      for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
        if (!first) out.append(", ");
        first = false;
        str(e.getKey().toString(), out);
        out.append(": ");
        json(e.getValue(), out);
      }
      out.append("}}");
    } else if (v instanceof List) {
      out.append("[");
      boolean first = true;
      for (Object x : (List<?>) v) {
        if (!first) out.append(", ");
        first = false;
        json(x, out);
      }
      out.append("]");
    } else throw new IllegalArgumentException("no JSON for " + v.getClass());
  }

  static void bytes(ByteBuffer b, StringBuilder out) {
    out.append("{\"bytes\": \"");
    while (b.hasRemaining()) out.append(String.format("%02x", b.get() & 0xff));
    out.append("\"}");
  }

  static void str(String s, StringBuilder out) {
    out.append('"');
    for (char c : s.toCharArray()) {
      if (c == '"' || c == '\\') out.append('\\').append(c);
      else if (c < 0x20 || c > 0x7e) out.append(String.format("\\u%04x", (int) c));
      else out.append(c);
    }
    out.append('"');
  }
}
