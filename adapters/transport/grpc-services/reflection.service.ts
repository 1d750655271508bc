/**
 * gRPC server reflection, v1 and v1alpha (the same messages under two package names): what
 * `grpcurl list`, `buf curl --list-services` and Postman ask to call the service without its
 * proto files. connect-es has no reflection of its own (connectrpc/connect-es#507); the
 * descriptors are the generated code's, so what reflection describes is what is served.
 *
 * For each request on the stream, one response:
 * - list_services: the services served;
 * - file_by_filename, file_containing_symbol (a message, enum, service or method name): the
 *   file's FileDescriptorProto and every file it imports, each once per stream;
 * - all_extension_numbers_of_type: none (the service's messages have no extensions);
 * - anything unknown: error_response NOT_FOUND, and the stream goes on.
 */
import { createRegistry, toBinary, type DescFile, type DescService } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { Code, type ServiceImpl } from "@connectrpc/connect";

import type { ServerReflection as ServerReflectionV1 } from "../../../gen/grpc/reflection/v1/reflection_pb.js";
import type {
  ServerReflection as ServerReflectionV1Alpha,
  ServerReflectionRequest,
  ServerReflectionResponse,
} from "../../../gen/grpc/reflection/v1alpha/reflection_pb.js";

/** The reply to one request, in the shape both versions share (their messages are field for field the same). */
type Reply = Omit<ServerReflectionResponse, "$typeName" | "originalRequest" | "validHost">;

/** The answers reflection gives about `services`, whatever the version asked. */
export class Reflection {
  readonly #services: DescService[];
  readonly #registry;
  readonly #files = new Map<string, DescFile>();

  constructor(services: DescService[]) {
    this.#services = services;
    this.#registry = createRegistry(...services.map((s) => s.file));
    const add = (file: DescFile) => {
      if (this.#files.has(file.proto.name)) return;
      this.#files.set(file.proto.name, file);
      for (const dependency of file.dependencies) add(dependency);
    };
    for (const s of services) add(s.file);
  }

  /**
   * The reply to `request`. `sent` holds the files this stream has already sent: a file is sent
   * once per stream, as grpc-go and grpc-java do, since clients keep what they received.
   */
  answer(request: Pick<ServerReflectionRequest, "messageRequest">, sent: Set<string>): Reply {
    const message = request.messageRequest;
    switch (message.case) {
      case "listServices":
        return {
          messageResponse: {
            case: "listServicesResponse",
            value: { service: this.#services.map((s) => ({ name: s.typeName })) } as never,
          },
        };
      case "fileByFilename": {
        const file = this.#files.get(message.value);
        return file ? this.#filesReply(file, sent) : notFound(`file ${message.value} not found`);
      }
      case "fileContainingSymbol": {
        const file = this.#fileOf(message.value);
        return file ? this.#filesReply(file, sent) : notFound(`symbol ${message.value} not found`);
      }
      case "allExtensionNumbersOfType": {
        const type = this.#registry.getMessage(message.value);
        if (type === undefined) return notFound(`type ${message.value} not found`);
        return {
          messageResponse: {
            case: "allExtensionNumbersResponse",
            value: { baseTypeName: type.typeName, extensionNumber: [] } as never,
          },
        };
      }
      case "fileContainingExtension":
        return notFound(`extension ${message.value.extensionNumber} of ${message.value.containingType} not found`);
      default:
        return {
          messageResponse: {
            case: "errorResponse",
            value: {
              errorCode: Code.InvalidArgument,
              errorMessage: "the request names nothing to reflect on",
            } as never,
          },
        };
    }
  }

  /** The file defining `symbol`: a message, enum, extension or service, or a service's method. */
  #fileOf(symbol: string): DescFile | undefined {
    const direct = this.#registry.get(symbol);
    if (direct !== undefined) return direct.file;
    const dot = symbol.lastIndexOf(".");
    const service = dot > 0 ? this.#registry.getService(symbol.slice(0, dot)) : undefined;
    return service?.methods.some((m) => m.name === symbol.slice(dot + 1)) ? service.file : undefined;
  }

  /** `file` and what it imports, less what this stream has sent already (the file itself always). */
  #filesReply(file: DescFile, sent: Set<string>): Reply {
    const out: Uint8Array[] = [];
    const visit = (f: DescFile, first: boolean) => {
      if (!first && sent.has(f.proto.name)) return;
      sent.add(f.proto.name);
      out.push(toBinary(FileDescriptorProtoSchema, f.proto));
      for (const d of f.dependencies) visit(d, false);
    };
    visit(file, true);
    return { messageResponse: { case: "fileDescriptorResponse", value: { fileDescriptorProto: out } as never } };
  }
}

function notFound(message: string): Reply {
  return {
    messageResponse: { case: "errorResponse", value: { errorCode: Code.NotFound, errorMessage: message } as never },
  };
}

/** The ServerReflection implementation for either version, over one Reflection. */
export function reflectionService(
  reflection: Reflection,
): ServiceImpl<typeof ServerReflectionV1> & ServiceImpl<typeof ServerReflectionV1Alpha> {
  return {
    async *serverReflectionInfo(requests: AsyncIterable<ServerReflectionRequest>) {
      const sent = new Set<string>();
      for await (const request of requests) {
        yield { validHost: request.host, originalRequest: request, ...reflection.answer(request, sent) };
      }
    },
  } as ServiceImpl<typeof ServerReflectionV1> & ServiceImpl<typeof ServerReflectionV1Alpha>;
}
